"""BrokerController: builds and runs one broker.

Owns the wiring (store, managers, processors, RPC server, NameServer registration) and the
lifecycle. Each processor gets the managers it uses, not the controller; ``processor_table`` is
the one place that says which handler serves which request code (RocketMQ's registerProcessor
calls). Start: load config tables (thread), start the store, bind the server, register with
every NameServer, then run the background routines (periodic registration, offset persistence,
client expiry, stats sampling) as tracked tasks, and serve ``/metrics`` when ``metricsPort`` is
set. Graceful shutdown, in order: answer held pulls,
unregister from the NameServers (routes vanish at once), stop the routines, stop the server
(finish in-flight requests, close connections), shut the store down (flush, remove the abort
file), persist offsets, topics and groups.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from rocketpy.acl.auth_guard import AuthGuard
from rocketpy.acl.auth_model import AuthDataError
from rocketpy.acl.guard import AclGuard
from rocketpy.acl.signing import RequestSigner
from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.broker.auth_metadata import AuthMetadataManager
from rocketpy.broker.consumer_manager import ConsumerManager, wall_clock_ms
from rocketpy.broker.failover.etcd import aiohttp_missing
from rocketpy.broker.failover.processor import ControllerProcessor
from rocketpy.broker.failover.replicas import ReplicasManager
from rocketpy.broker.failover.role import ControllerReplication
from rocketpy.broker.failover.routed_topics import RouteLookupError, routed_topics
from rocketpy.broker.ha.role import SEND_CODES, Replication
from rocketpy.broker.master_services import MasterOnlyServices
from rocketpy.broker.metrics import BrokerCollector
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.pop.assignment import AssignmentService, MessageRequestModeTable, RouteCache
from rocketpy.broker.pop.service import PopService
from rocketpy.broker.processors.ack import AckMessageProcessor
from rocketpy.broker.processors.admin import AdminProcessor
from rocketpy.broker.processors.admin_queue import ConsumeQueueViewProcessor
from rocketpy.broker.processors.admin_stats import AdminStatsProcessor
from rocketpy.broker.processors.admin_stats_view import BrokerStatsViewProcessor
from rocketpy.broker.processors.admin_store import StoreCleanProcessor
from rocketpy.broker.processors.assignment import AssignmentProcessor
from rocketpy.broker.processors.auth import AuthProcessor
from rocketpy.broker.processors.client_calls import ClientCallsProcessor
from rocketpy.broker.processors.client_manage import ClientManageProcessor
from rocketpy.broker.processors.consumer_manage import ConsumerManageProcessor
from rocketpy.broker.processors.end_transaction import EndTransactionProcessor
from rocketpy.broker.processors.guard import Guard
from rocketpy.broker.processors.pop import POP_CODES, PopMessageProcessor
from rocketpy.broker.processors.pull import PullMessageProcessor
from rocketpy.broker.processors.query import QueryProcessor
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.processors.send_back import SendBackProcessor
from rocketpy.broker.queue_locks import RebalanceLockManager
from rocketpy.broker.registration import BrokerIdentity, BrokerRegistrar
from rocketpy.broker.schedule.delivery import DeliveryTimeService
from rocketpy.broker.send_queue import SendQueue
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.faults import DiskFaults
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager, TopicLimitError
from rocketpy.broker.trace import BrokerTracer
from rocketpy.broker.transaction.service import TransactionService
from rocketpy.config import BrokerConfig, StoreConfig, advertised_host, parse_delay_levels
from rocketpy.errors import RemotingConnectError, RocketpyError
from rocketpy.metrics import MetricsServer
from rocketpy.perm import PERM_RW
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.client import ConsumerGroupRequestHeader
from rocketpy.protocol.specs import check_served
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler, ProcessorTable
from rocketpy.remoting.server import RemotingServer
from rocketpy.route import MASTER_ID

if TYPE_CHECKING:  # loaded only with grpcServerPort >= 0 (grpc and protobuf cost memory)
    from rocketpy.broker.grpc.channel import GrpcChannel
    from rocketpy.broker.grpc.server import GrpcEndpoint

log = logging.getLogger("rocketpy.broker")

CLIENT_SCAN_INTERVAL_MS = 10_000
STATS_SAMPLE_INTERVAL_MS = 1_000
TABLE_PERSIST_INTERVAL_MS = 1_000
SERVER_SHUTDOWN_TIMEOUT_S = 5.0
#: Most time a replica promoted to master spends taking over topics from the NameServers' routes.
TAKE_OVER_TOPICS_S = 2.0


def _expand_store_paths(store_config: StoreConfig) -> StoreConfig:
    """A copy of ``store_config`` with ``~`` expanded in its directories (as .properties files use)."""
    update = {"store_path_root_dir": os.path.expanduser(store_config.store_path_root_dir)}
    if store_config.store_path_commit_log:
        update["store_path_commit_log"] = os.path.expanduser(store_config.store_path_commit_log)
    return store_config.model_copy(update=update)


#: Writes other than sends (refused by a broker that is not master, in controller mode).
WRITE_CODES = (
    RequestCode.CONSUMER_SEND_MSG_BACK,
    RequestCode.END_TRANSACTION,
    RequestCode.END_TRANSACTION_BATCH,
)


def gated(handler: Handler, refusal: Callable[[], tuple[int, str] | None]) -> Handler:
    """``handler`` behind ``refusal`` (answered with its code and remark when it returns one)."""

    def handle(channel: Channel, request: RemotingCommand) -> Any:
        refused = refusal()
        if refused is not None:
            return RemotingCommand.response(request, refused[0], refused[1])
        return handler(channel, request)

    return handle


def _own_signer(bc: BrokerConfig) -> RequestSigner | None:
    """The broker's own requests' signer: ACL 2.0's inner-client user, else the ACL 1.0 account."""
    creds = bc.inner_client_authentication_credentials
    if creds:
        doc = json.loads(creds)  # checked when the config was loaded
        return RequestSigner(doc["accessKey"], doc["secretKey"])
    if bc.acl_access_key and bc.acl_secret_key:
        return RequestSigner(bc.acl_access_key, bc.acl_secret_key)
    return None


def _loop_info() -> dict[str, str]:
    """The event loop's task count, for GET_BROKER_RUNTIME_INFO (a leak shows as steady growth)."""
    return {"asyncioTaskCount": str(len(asyncio.all_tasks()))}


class BrokerController:
    """One broker: store, managers, processors, server and background routines.

    Args:
        broker_config: broker settings (may be changed live by UPDATE_BROKER_CONFIG).
        store_config: store settings.
        faults: injected disk faults (tests; ``ROCKETPY_STORE_FAULTS``).
    """

    def __init__(
        self, broker_config: BrokerConfig, store_config: StoreConfig, faults: DiskFaults | None = None
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config = _expand_store_paths(store_config)
        bc = broker_config
        config_dir = os.path.join(store_config.store_path_root_dir, "config")
        self.topic_config = TopicConfigManager(bc, os.path.join(config_dir, "topics.json"))
        self.offsets = ConsumerOffsetManager(os.path.join(config_dir, "consumerOffset.json"))
        self.subscription_groups = SubscriptionGroupManager(
            os.path.join(config_dir, "subscriptionGroup.json"), bc.auto_create_subscription_group
        )
        self.consumer_manager = ConsumerManager(self._notify_ids_changed, bc.channel_expired_timeout)
        self.queue_locks = RebalanceLockManager()
        self.stats = BrokerStats()
        # the listen port until the server is bound (records are written only after that)
        self.store = MessageStore(
            store_config, store_host=(self.advertised_ip(), bc.listen_port), faults=faults
        )
        # built here, not in processor_table: the controller wires its held pulls to the store's
        # dispatch, to connection closes and to shutdown
        # the checks in front of pulls, sends and send-backs (broker/processors/guard.py)
        self.guard = Guard(bc, self.topic_config, self.subscription_groups)
        self.pull_processor = PullMessageProcessor(
            self.guard, store_config, self.consumer_manager, self.offsets, self.store, self.stats
        )
        self.long_polling = self.pull_processor.holds
        # puts waiting for the disk; new sends get SYSTEM_BUSY when they wait too long (send_queue.py)
        self.send_queue = SendQueue(bc, store_config, self.store.flush_started)
        # delay levels and timer messages: re-puts to the real topic when due
        self.delivery = DeliveryTimeService(self.store, store_config, config_dir)
        # half messages, END_TRANSACTION and the check service
        self.transactions = TransactionService(
            bc, self.store, self.delivery, self.topic_config, self.consumer_manager, config_dir
        )
        # what runs only on the group's master (POP registers below, once its service exists)
        self.master_services = MasterOnlyServices()
        self.master_services.register(
            "delivery (delay levels, timer)", self.delivery.start, self.delivery.shutdown
        )
        self.master_services.register(
            "transaction checks", self.transactions.start, self.transactions.shutdown
        )
        # signed with the broker's own account when the NameServers (or a slave's master) check ACL:
        # ACL 2.0's inner-client user when set, else the ACL 1.0 account
        self.client = RemotingClient(signer=_own_signer(bc))
        # ACL 2.0's users and ACLs (served always; checked with authenticationEnabled)
        self.auth = AuthMetadataManager(os.path.join(config_dir, "auth.json"), bc.broker_cluster_name)
        # POP consumption (broker/pop/): in-flight bookkeeping, revive log, retry/DLQ, long polling
        self.pop = PopService(
            bc, store_config, self.store, self.topic_config, self.subscription_groups, self.offsets,
            self.stats, config_dir,
        )  # fmt: skip
        self.master_services.register(
            "POP (in-flight bookkeeping replay, revive)", self.pop.start, self.pop.shutdown
        )
        # QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE (server-side load balancing)
        self.request_modes = MessageRequestModeTable(os.path.join(config_dir, "messageRequestMode.json"))
        routes = RouteCache(self.client, self.namesrv_addrs)
        self.assignment = AssignmentService(bc, self.consumer_manager, self.request_modes, routes)
        self.acl: AclGuard | None = None
        # traceTopicEnable: the trace topic and the broker's own trace records (broker/trace.py)
        self.tracer = BrokerTracer(bc, self.store, self.topic_config) if bc.trace_topic_enable else None
        self.pull_processor.tracer = self.tracer
        # master/slave replication: HA port, SYNC_MASTER waits, a slave's copying (broker/ha/);
        # in controller mode etcd elects the master and the role changes at run time (broker/failover/)
        replication_class = ControllerReplication if bc.enable_controller_mode else Replication
        self.replication = replication_class(
            bc, store_config, self.store, self.client,
            self.topic_config, self.offsets, self.delivery.offsets, self.subscription_groups,
        )  # fmt: skip
        self.failover: ReplicasManager | None = None
        if isinstance(self.replication, ControllerReplication):
            self.failover = ReplicasManager(
                bc, store_config, self.store, self.replication, self.master_services, self.client
            )
        self.pull_processor.suggest_broker_id = self.replication.pull_suggestion()
        if self.replication.is_slave:  # a slave copies its master's users and ACLs
            self.auth.read_only = True
            if self.replication.sync is not None:
                self.replication.sync.auth = self.auth
        if self.tracer is not None and self.replication.is_slave:
            self.tracer.enabled = False  # a slave stores only what it replicates
        self.server: RemotingServer | None = None
        self.metrics: MetricsServer | None = None  # metricsPort > 0: the /metrics endpoint
        self.grpc: GrpcEndpoint | None = None  # grpcServerPort >= 0: RocketMQ 5's gRPC API
        self.auth_guard: AuthGuard | None = None  # authenticationEnabled: ACL 2.0's check
        self.registrar: BrokerRegistrar | None = None
        self.broker_addr = ""
        self._tasks: set[asyncio.Task[None]] = set()
        self._register_wanted = asyncio.Event()
        self._stopping = False

    def advertised_ip(self) -> str:
        """The IP clients and NameServers should use: brokerIP1, else derived from the bind address."""
        bc = self.broker_config
        if bc.broker_ip1:
            return bc.broker_ip1
        return advertised_host(bc.bind_address)

    def _load_tables(self) -> None:
        self.topic_config.load()
        self.offsets.load()
        self.subscription_groups.load()
        self.request_modes.load()
        self.auth.load()

    async def start(self) -> str:
        """Start everything and register with the NameServers; returns the advertised ``ip:port``."""
        bc = self.broker_config
        try:
            await asyncio.to_thread(self._load_tables)
        except (ValueError, KeyError, TypeError) as e:
            raise RocketpyError(f"cannot load the broker's config tables: {e}") from e
        # The loaded tables live as long as the broker; a full GC pass over 100,000 topics' objects
        # would stall the loop for most of a second each time, so they leave the GC's view.
        gc.freeze()
        if self.tracer is not None and self.tracer.enabled:
            self.tracer.ensure_topic()
        if self.failover is not None and aiohttp_missing():
            raise RocketpyError(str(aiohttp_missing()))
        await self.store.start()
        self.long_polling.listen_with(self.store.listen_to_dispatches)
        if self.replication.is_slave or self.failover is not None:
            # a slave writes only what it replicates; it keeps the progress (in controller mode the
            # master-only services start when this broker becomes master)
            await asyncio.to_thread(self.delivery.offsets.load)
        else:
            await self.master_services.start_all()  # delivery, transaction checks
        if self.failover is not None:
            await self.failover.load()
        self.server = RemotingServer(
            bc.bind_address,
            bc.listen_port,
            name=f"broker {bc.broker_name}",
            max_frame_bytes=bc.max_frame_bytes,
            **bc.server_limits(),
        )
        table = self.processor_table()
        check_served("broker", table)
        for code, handler in table.items():
            self.server.register_processor(code, handler)
        await self._install_access_control(self.server)
        send = self.send_processor
        if all(table[code] == send.handle for code in SEND_CODES):  # a slave refuses sends instead
            self.server.register_run_processor(frozenset(SEND_CODES), send.handle_run)
        self.server.add_close_listener(self._on_channel_close)
        _, port = await self.server.start()
        ip = self.advertised_ip()
        self.store.store_host = (ip, port)
        self.broker_addr = f"{ip}:{port}"
        ha_addr = await self.replication.start(bc.bind_address, ip, port)
        grpc_addr = ""
        if bc.grpc_server_port >= 0:
            self.grpc = self._grpc_endpoint(table)
            grpc_addr = f"{ip}:{await self.grpc.start(bc.bind_address)}"
        if bc.metrics_port:
            self.metrics = self._metrics_server(self.server)
            await self.metrics.start()
        broker_id = bc.broker_id if self.failover is None else self.failover.broker_id
        identity = BrokerIdentity(
            bc.broker_cluster_name, bc.broker_name, broker_id, self.broker_addr, ha_addr, grpc_addr
        )
        self.registrar = BrokerRegistrar(
            self.client,
            self.namesrv_addrs(),
            identity,
            self.registration_wrapper,
            bc.register_broker_timeout_mills,
            self.replication.on_registered,
            bc.split_registration_size if bc.enable_split_registration else 0,
            lambda: (len(self.topic_config.table), dict(self.topic_config.data_version)),
        )
        self.topic_config.add_change_listener(self._register_wanted.set)
        await self.registrar.register_all()
        if self.failover is not None:
            await self.failover.start(self.broker_addr, ha_addr, self._registered_as)
        for routine in (self._registration_routine(), self._persist_routine(), self._client_scan_routine(),
                        self._stats_routine(), *self.replication.routines()):  # fmt: skip
            self._spawn(routine)
        if self.tracer is not None and self.tracer.enabled:
            self._spawn(self.tracer.run_routine())
        log.info("broker %s started at %s", bc.broker_name, self.broker_addr)
        return self.broker_addr

    async def _install_access_control(self, server: RemotingServer) -> None:
        """ACL 2.0 (authenticationEnabled: users and ACLs) or ACL 1.0 (aclEnable: plain_acl.yml)."""
        bc = self.broker_config
        owner = f"broker {bc.broker_name}"
        if not self.auth.read_only:
            try:
                made = self.auth.init_users(
                    bc.init_authentication_user, bc.inner_client_authentication_credentials
                )
            except AuthDataError as e:
                raise RocketpyError(f"cannot create the initial users: {e}") from e
            if made:
                log.info("%s: created Super user(s) %s", owner, ", ".join(made))
                await self.auth.file.persist()
        if bc.authentication_enabled:
            guard = self.auth_guard = AuthGuard(bc.broker_cluster_name, bc.authorization_enabled, owner)
            self.auth.add_listener(guard.use)
            server.set_guard(guard)
            if not self.auth.users and not self.auth.read_only:
                log.warning("%s: ACL 2.0 is on and no user exists: every request is refused; set "
                            "initAuthenticationUser", owner)  # fmt: skip
            return
        self.acl = await AclGuard.install(bc, server, None, owner)

    async def _registered_as(self, broker_id: int) -> None:
        """Controller mode: this broker's id in routes changed (0 as master); tell the NameServers now
        (as master, with the topics they route to this broker name that it lacks taken over first)."""
        if self.registrar is None or self.registrar.identity.broker_id == broker_id:
            return
        if broker_id == MASTER_ID:
            await self._take_over_routed_topics()
        self.registrar.identity.broker_id = broker_id
        await self.registrar.register_all()

    async def _take_over_routed_topics(self) -> None:
        """Add the topics the NameServers route to this broker name that this replica had not copied
        from its master yet (``failover/routed_topics.py``), before registering as master."""
        name = self.broker_config.broker_name
        try:
            found = await routed_topics(
                self.client, self.namesrv_addrs(), name, self.topic_config.table, TAKE_OVER_TOPICS_S
            )
        except RouteLookupError as e:
            log.warning("controller: no NameServer listed the topics (%s); topics created on the old "
                        "master in its last slaveSyncInterval may be missing from this one", e)  # fmt: skip
            return
        taken = []
        for tc in found:
            try:
                self.topic_config.update(tc)
            except TopicLimitError as e:
                log.error("controller: topic %s not taken over: %s", tc.topic_name, e)
                break
            taken.append(tc.topic_name)
        if taken:
            await self.topic_config.file.persist()
            log.warning("controller: took over %d topic(s) the NameServers route to %s that this replica "
                        "had not copied from the old master yet: %s", len(taken), name,
                        ", ".join(taken[:20]) + (" ..." if len(taken) > 20 else ""))  # fmt: skip

    def _metrics_server(self, server: RemotingServer) -> MetricsServer:
        bc = self.broker_config
        collector = BrokerCollector(
            bc, self.store_config, server, self.stats, self.store,
            self.topic_config, self.offsets, self.long_polling, self.replication, self.grpc, self.pop,
            self.failover,
        )  # fmt: skip
        return MetricsServer.for_daemon(
            collector, bc.bind_address, bc.metrics_port, f"broker {bc.broker_name}"
        )

    def _grpc_endpoint(self, table: dict[RequestCode, Handler]) -> GrpcEndpoint:
        """RocketMQ 5's gRPC API over this broker's processors (``table``) and managers."""
        from rocketpy.broker.grpc.clients import GrpcClients
        from rocketpy.broker.grpc.consumers import ConsumerRpcs
        from rocketpy.broker.grpc.receive import Receiver
        from rocketpy.broker.grpc.renew import RenewTable
        from rocketpy.broker.grpc.routes import RouteSource
        from rocketpy.broker.grpc.server import GrpcEndpoint
        from rocketpy.broker.grpc.service import MessagingService
        from rocketpy.broker.grpc.streams import Streams

        bc = self.broker_config
        send = self.send_processor
        streams: Streams | None = None

        def to_telemetry(channel: GrpcChannel, command: RemotingCommand) -> None:
            if streams is not None:
                streams.recover_orphaned(channel, command)

        clients = GrpcClients(
            ProcessorTable(f"broker {bc.broker_name} gRPC"), table[RequestCode.HEART_BEAT],
            table[RequestCode.UNREGISTER_CLIENT], self._on_channel_close, to_telemetry,
        )  # fmt: skip
        routes = RouteSource(self.client, self.namesrv_addrs())
        service = MessagingService(
            bc, self.store_config, {int(code): h for code, h in table.items()}, self.topic_config,
            self.store, self.subscription_groups, routes, clients,
            lambda: self.acl.validator if self.acl is not None else None,
            lambda: self.delivery.timer if self.master_services.running else None,
            send.handle_run if table[RequestCode.SEND_MESSAGE_V2] == send.handle else None,
        )  # fmt: skip
        streams = Streams(service, clients)
        renew = RenewTable(
            bc, self.pop, lambda cid: cid in clients.table,
            parse_delay_levels(self.store_config.message_delay_level),
        )  # fmt: skip
        receiver = Receiver(service, self.pop, renew, lambda: self.replication.is_slave)
        consumers = ConsumerRpcs(service, self.pop, self.assignment, renew)
        endpoint = GrpcEndpoint(bc, service, streams, clients, consumers, receiver)
        if self.auth_guard is not None:  # ACL 2.0 on gRPC calls too
            from rocketpy.grpc_api.auth import AuthInterceptor

            guard = self.auth_guard
            endpoint.interceptors.append(AuthInterceptor(lambda: guard.evaluator))
        return endpoint

    def namesrv_addrs(self) -> list[str]:
        """The NameServers of ``namesrvAddr`` (none: a broker alone, registered nowhere)."""
        addr = self.broker_config.namesrv_addr
        return parse_namesrv_addrs(addr) if addr else []

    def processor_table(self) -> dict[RequestCode, Handler]:
        """Request code -> handler: every code this broker serves, in one table."""
        bc, sc, store, topics = self.broker_config, self.store_config, self.store, self.topic_config
        groups, consumers, offsets = self.subscription_groups, self.consumer_manager, self.offsets
        send = SendMessageProcessor(
            self.guard, sc, store, self.delivery, self.stats, self.transactions, self.send_queue
        )
        self.send_processor = send  # also takes the sends of one read together (start)
        end_transaction = EndTransactionProcessor(self.transactions)
        send_back = SendBackProcessor(send)
        send_back.tracer = self.tracer
        pull = self.pull_processor
        query = QueryProcessor(store)
        client = ClientManageProcessor(bc, topics, groups, consumers)
        pop = PopMessageProcessor(self.pop)
        ack = AckMessageProcessor(self.pop)
        assignment = AssignmentProcessor(self.assignment)
        consumer = ConsumerManageProcessor(consumers, offsets, self.queue_locks, store)
        admin = AdminProcessor(
            bc, sc, topics, groups, offsets, store, self.topics_changed_commit, self.broker_config_changed
        )
        calls = ClientCallsProcessor(bc, topics, consumers, offsets, store)
        stats = AdminStatsProcessor(
            bc, topics, consumers, offsets, store, self.stats, pull.holds, self.delivery
        )
        store_clean = StoreCleanProcessor(topics, store)
        queue_view = ConsumeQueueViewProcessor(topics, consumers, store)
        stats_view = BrokerStatsViewProcessor(
            bc, topics, consumers, offsets, store, self.stats, lambda: self.broker_addr
        )
        stats.runtime_extras.append(self.replication.runtime_info)
        stats.runtime_extras.append(self.send_queue.runtime_info)
        stats.runtime_extras.append(_loop_info)
        if self.tracer is not None:
            stats.runtime_extras.append(self.tracer.runtime_info)
        stats.pop_view = self.pop.inflight
        if self.replication.is_sync_master:  # others keep the inline send path
            send.replica_future = self.replication.replica_future
        failover = self.failover
        controller = ControllerProcessor(failover)
        auth = AuthProcessor(self.auth)
        if failover is not None:
            stats.runtime_extras.append(failover.runtime_info)
            send.write_gate, send.ack_gate = failover.write_refusal, failover.ack_refusal
            if failover.all_ack:
                send.replica_future = failover.ack_future
        table: dict[RequestCode, Handler] = {
            # messages in and out
            RequestCode.SEND_MESSAGE: send.handle,
            RequestCode.SEND_MESSAGE_V2: send.handle,
            RequestCode.SEND_BATCH_MESSAGE: send.handle,
            RequestCode.CONSUMER_SEND_MSG_BACK: send_back.handle,
            RequestCode.PULL_MESSAGE: pull.handle,
            RequestCode.LITE_PULL_MESSAGE: pull.handle,
            RequestCode.END_TRANSACTION: end_transaction.handle,
            RequestCode.END_TRANSACTION_BATCH: end_transaction.handle_batch,
            # POP consumption (RocketMQ 5)
            RequestCode.POP_MESSAGE: pop.pop,
            RequestCode.PEEK_MESSAGE: pop.peek,
            RequestCode.NOTIFICATION: pop.notification,
            RequestCode.POLLING_INFO: pop.polling_info,
            RequestCode.ACK_MESSAGE: ack.ack,
            RequestCode.BATCH_ACK_MESSAGE: ack.batch_ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ack.change_invisible_time,
            RequestCode.QUERY_ASSIGNMENT: assignment.query_assignment,
            RequestCode.SET_MESSAGE_REQUEST_MODE: assignment.set_message_request_mode,
            # queue offsets and message queries
            RequestCode.GET_MAX_OFFSET: query.get_max_offset,
            RequestCode.GET_MIN_OFFSET: query.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: query.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: query.get_earliest_msg_storetime,
            RequestCode.QUERY_MESSAGE: query.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
            # clients and consumer groups
            RequestCode.HEART_BEAT: client.heart_beat,
            RequestCode.UNREGISTER_CLIENT: client.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer.get_consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: consumer.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: consumer.update_consumer_offset,
            RequestCode.LOCK_BATCH_MQ: consumer.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: consumer.unlock_batch,
            # administration
            RequestCode.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
            RequestCode.GET_BROKER_CONFIG: admin.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: admin.update_broker_config,
            # statistics
            RequestCode.GET_BROKER_RUNTIME_INFO: stats.get_runtime_info,
            RequestCode.GET_CONSUME_STATS: stats.get_consume_stats,
            RequestCode.GET_TOPIC_STATS_INFO: stats.get_topic_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: stats.get_consumer_connections,
            RequestCode.VIEW_BROKER_STATS_DATA: stats_view.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: stats_view.get_broker_consume_stats,
            # the store's housekeeping
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: store_clean.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: store_clean.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: store_clean.delete_expired_commitlog,
            RequestCode.QUERY_CONSUME_QUEUE: queue_view.query_consume_queue,
            # a group's live clients, called on their own connections
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: calls.invoke_reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: calls.invoke_get_consumer_status,
            RequestCode.GET_CONSUMER_RUNNING_INFO: calls.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: calls.consume_message_directly,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: calls.get_producer_connections,
            # controller mode (answered "controller mode is off" otherwise)
            RequestCode.GET_BROKER_EPOCH_CACHE: controller.get_broker_epoch_cache,
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: controller.notify_role_changed,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: controller.get_sync_state_data,
            RequestCode.CONTROLLER_GET_METADATA_INFO: controller.get_metadata,
            RequestCode.CONTROLLER_ELECT_MASTER: controller.elect_master,
            # ACL 2.0: users and ACLs
            RequestCode.AUTH_CREATE_USER: auth.create_user,
            RequestCode.AUTH_UPDATE_USER: auth.update_user,
            RequestCode.AUTH_DELETE_USER: auth.delete_user,
            RequestCode.AUTH_GET_USER: auth.get_user,
            RequestCode.AUTH_LIST_USER: auth.list_users,
            RequestCode.AUTH_CREATE_ACL: auth.create_acl,
            RequestCode.AUTH_UPDATE_ACL: auth.create_acl,
            RequestCode.AUTH_DELETE_ACL: auth.delete_acl,
            RequestCode.AUTH_GET_ACL: auth.get_acl,
            RequestCode.AUTH_LIST_ACL: auth.list_acls,
        }
        self.replication.update_handlers(table)
        if self.replication.is_slave:  # POP writes its bookkeeping: masters only
            for code in POP_CODES:
                table[code] = self._refuse_pop
        if failover is not None:  # other writes than sends: only on the master
            for code in WRITE_CODES:
                table[code] = gated(table[code], failover.write_refusal)
        return table

    def _refuse_pop(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        bc = self.broker_config
        return RemotingCommand.response(
            request,
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{bc.broker_name}] is a slave (brokerId {bc.broker_id}) and does not serve POP "
            "consumption; pop from its master (brokerId 0)",
        )

    def registration_wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper for REGISTER_BROKER; topic perms are capped by brokerPermission."""
        doc = self.topic_config.snapshot()
        broker_perm = self.broker_config.broker_permission
        if (broker_perm & PERM_RW) != PERM_RW:
            for tc in doc["topicConfigTable"].values():
                tc["perm"] &= broker_perm
        return doc

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("broker routine %s failed", task.get_coro(), exc_info=task.exception())

    # -- background routines ----------------------------------------------------------------

    async def _registration_routine(self) -> None:
        assert self.registrar is not None
        while True:
            period_s = self.broker_config.register_name_server_period / 1000.0
            try:
                async with asyncio.timeout(period_s):
                    await self._register_wanted.wait()
            except TimeoutError:
                pass
            self._register_wanted.clear()
            if self.failover is not None:  # brokerId 0 only while it may acknowledge as master
                self.registrar.identity.broker_id = self.failover.route_broker_id()
            await self.registrar.register_all()

    async def _persist_routine(self) -> None:
        last_offsets = time.monotonic()
        while True:
            await asyncio.sleep(TABLE_PERSIST_INTERVAL_MS / 1000.0)
            await self.topic_config.file.persist()
            await self.subscription_groups.file.persist()
            if time.monotonic() - last_offsets >= self.broker_config.flush_consumer_offset_interval / 1000.0:
                last_offsets = time.monotonic()
                await self.offsets.file.persist()

    async def _client_scan_routine(self) -> None:
        while True:
            expiry = self.broker_config.channel_expired_timeout
            await asyncio.sleep(min(CLIENT_SCAN_INTERVAL_MS, max(expiry // 4, 100)) / 1000.0)
            self.consumer_manager.channel_expired_timeout_ms = expiry
            self.consumer_manager.scan_not_active(wall_clock_ms())

    async def _stats_routine(self) -> None:
        while True:
            await asyncio.sleep(STATS_SAMPLE_INTERVAL_MS / 1000.0)
            self.stats.sample()

    # -- hooks given to the admin processor -------------------------------------------------

    async def topics_changed_commit(self) -> None:
        """Persist the topic table and register with the NameServers now (admin changes)."""
        await self.topic_config.file.persist()
        if self.registrar is not None:
            await self.registrar.register_all()

    async def broker_config_changed(self, keys: set[str]) -> None:
        """React to live config changes (re-register when the permission changed)."""
        self.subscription_groups.auto_create = self.broker_config.auto_create_subscription_group
        self.consumer_manager.channel_expired_timeout_ms = self.broker_config.channel_expired_timeout
        if "brokerPermission" in keys and self.registrar is not None:
            await self.registrar.register_all()
        self._register_wanted.set()

    def _notify_ids_changed(self, group: str, channels: list[Channel]) -> None:
        for channel in channels:
            if channel.closed:
                continue
            cmd = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ConsumerGroupRequestHeader.pack(group), oneway=True
            )
            try:
                channel.send_oneway(cmd)
            except RemotingConnectError as e:
                log.info("cannot notify %s of group %s change: %s", channel.remote_addr, group, e)

    def _on_channel_close(self, channel: Channel) -> None:
        self.long_polling.on_channel_close(channel)
        self.consumer_manager.do_channel_close(channel)

    # -- shutdown -----------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Graceful stop (see the module docstring for the order)."""
        if self._stopping:
            return
        self._stopping = True
        answered = self.long_polling.shutdown()
        log.info("shutdown: answered %d held pulls, %d waiting pops", answered, self.pop.waiters.shutdown())
        if self.failover is not None:  # stop acknowledging and end the lease: a replica takes over now
            await self.failover.shutdown()
        if self.registrar is not None:
            await self.registrar.unregister_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.tracer is not None and self.tracer.enabled:
            await self.tracer.flush()  # the records of the last deliveries and send-backs
        if self.metrics is not None:
            await self.metrics.shutdown()
        if self.grpc is not None:
            await self.grpc.shutdown(
                min(SERVER_SHUTDOWN_TIMEOUT_S, self.broker_config.grpc_shutdown_time_seconds)
            )
        if self.acl is not None:
            await self.acl.stop()
        if self.server is not None:
            await self.server.shutdown(SERVER_SHUTDOWN_TIMEOUT_S)
        await self.replication.shutdown()
        if self.master_services.running:
            # stops transaction checks and re-puts; persists transactionOffset / delayOffset / timercheck
            await self.master_services.stop_all()
        else:
            await self.delivery.offsets.file.persist()
        await self.store.shutdown()  # a no-op when it never started
        await self.offsets.file.persist(force=True)
        await self.topic_config.file.persist(force=True)
        await self.subscription_groups.file.persist(force=True)
        await self.request_modes.file.persist()
        await self.auth.file.persist()
        await self.client.close()
        log.info("broker %s stopped", self.broker_config.broker_name)
