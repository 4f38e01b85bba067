#!/usr/bin/env python3
"""POP's handlers against pull's, in process: the broker CPU a consumed message costs in the
request handlers alone, without the network and framing both kinds of request share.

    .venv/bin/python scripts/bench_pop_handlers.py [--messages 100000] [--rounds 2] [--acks-every 8]

``bench_pop.py`` measures the whole broker process (its CPU per consumed message, POP against pull);
this script says where POP's extra goes. It builds one broker (``BrokerController``, not started as
a server: its processor table is called directly) with a fresh backlog of ``--messages`` 1 KiB
messages per run on 8 queues, then drains each backlog one way, timing only the handler calls (the
thread's CPU time around each call; decoding the answers, which a client does, is left out):

- pop: POP_MESSAGE of 32 from any queue, and a BATCH_ACK_MESSAGE of what ``--acks-every`` pops
  returned (the SimpleConsumer of ``bench_pop.py`` with 16 receive loops sends one per ~8 pops);
- pull: PULL_MESSAGE of 32 from each queue in turn (no suspend, the subscription in the request).

Runs go in ABBA order (``bench_abba``); each line prints µs per consumed message, the pop side
split into its pops and its acks. What the handlers' difference means for the whole broker: every
request also costs the same framing and socket work (``bench_broker_cpu.py`` measures a pull of 32
at ~19 µs of broker CPU in all), so POP's whole-broker ratio is about
``(frame + pop + ack) / (frame + pull)``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_abba import abba  # noqa: E402

from rocketpy.broker.controller import BrokerController  # noqa: E402
from rocketpy.broker.store import BrokerMessage  # noqa: E402
from rocketpy.client.answers import pack_body  # noqa: E402
from rocketpy.client.pop_result import pop_result  # noqa: E402
from rocketpy.client.receipts import ack_groups, batch_acks  # noqa: E402
from rocketpy.config import BrokerConfig, StoreConfig  # noqa: E402
from rocketpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rocketpy.protocol.headers.pop import batch_ack_body  # noqa: E402
from rocketpy.protocol.headers.pull import PullMessageRequestHeader  # noqa: E402
from rocketpy.remoting.command import RemotingCommand  # noqa: E402
from rocketpy.route import TopicConfig  # noqa: E402
from rocketpy.subscription_group import SubscriptionGroupConfig  # noqa: E402
from rocketpy.sysflag import FLAG_SUBSCRIPTION  # noqa: E402

QUEUES, BATCH, GROUP, BROKER = 8, 32, "G", "bench-handlers"


async def call(handler: Any, request: RemotingCommand) -> tuple[Any, int]:
    """``handler``'s answer to ``request`` and the thread CPU (ns) the call took (run eagerly: a
    handler that returns a coroutine is awaited inside the timing). The garbage collector runs
    before the call, untimed, so that a collection the client side's decoding made due does not
    land in a handler's time."""
    gc.collect(0)
    t0 = time.thread_time_ns()
    answer = handler(None, request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer, time.thread_time_ns() - t0


async def backlog(c: BrokerController, topic: str, count: int) -> None:
    c.topic_config.update(TopicConfig(topic_name=topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
    body = b"x" * 1024
    for i in range(0, count, 256):
        msgs = [BrokerMessage(topic, (i // 256) % QUEUES, body, "") for _ in range(min(256, count - i))]
        result = await c.store.put_messages(msgs)
        assert result.ok, result


async def drain_pop(c: BrokerController, topic: str, count: int, acks_every: int) -> tuple[int, int, int]:
    """(messages, pop ns, ack ns) of draining ``topic`` by POP with batch acks."""
    table = c.processor_table()
    pop, ack = table[RequestCode.POP_MESSAGE], table[RequestCode.BATCH_ACK_MESSAGE]
    got = pops = pop_ns = ack_ns = 0
    held: list[Any] = []
    while got < count:
        ext = {"consumerGroup": GROUP, "topic": topic, "queueId": -1, "maxMsgNums": BATCH,
               "invisibleTime": 60_000, "pollTime": 0, "bornTime": 1, "initMode": 0, "expType": "TAG",
               "exp": "*"}  # fmt: skip
        answer, ns = await call(pop, RemotingCommand.request(RequestCode.POP_MESSAGE, ext))
        pop_ns += ns
        if answer.code != ResponseCode.SUCCESS:
            raise SystemExit(f"pop answered {answer.code}: {answer.remark}")
        msgs = pop_result(answer, "bench", BROKER, False).messages
        got, pops = got + len(msgs), pops + 1
        held += msgs
        if pops % acks_every == 0 or got >= count:
            body = pack_body(batch_ack_body(BROKER, batch_acks(GROUP, ack_groups(held))))
            answer, ns = await call(ack, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, body))
            ack_ns += ns
            if answer.code != ResponseCode.SUCCESS or answer.remark:
                raise SystemExit(f"batch ack answered {answer.code}: {answer.remark}")
            held = []
    return got, pop_ns, ack_ns


async def drain_pull(c: BrokerController, topic: str, count: int) -> tuple[int, int]:
    """(messages, pull ns) of draining ``topic`` by pulls of 32 from each queue in turn."""
    pull = c.processor_table()[RequestCode.PULL_MESSAGE]
    offsets = [0] * QUEUES
    got = pull_ns = 0
    q = 0
    while got < count:
        ext = PullMessageRequestHeader.pack(
            GROUP, topic, q, offsets[q], BATCH, FLAG_SUBSCRIPTION, 0, 0, "*", 0, "TAG", None
        )
        answer, ns = await call(pull, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext))
        pull_ns += ns
        if answer.code == ResponseCode.SUCCESS:
            n = int(answer.ext["nextBeginOffset"]) - offsets[q]
            offsets[q] += n
            got += n
        q = (q + 1) % QUEUES
    return got, pull_ns


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-handlers-") as tmp:
        bc = BrokerConfig(brokerName=BROKER, bindAddress="127.0.0.1", listenPort=0, grpcServerPort=0)
        c = BrokerController(bc, StoreConfig(storePathRootDir=tmp))
        await c.start()
        try:
            c.subscription_groups.update(SubscriptionGroupConfig(GROUP))
            pops: list[float] = []
            pulls: list[float] = []
            n = 0
            for rnd in range(args.rounds):
                for kind in abba(rnd, "pop", "pull"):
                    n += 1
                    topic = f"BenchHandlers{n}"
                    await backlog(c, topic, args.messages)
                    if kind == "pop":
                        got, pop_ns, ack_ns = await drain_pop(c, topic, args.messages, args.acks_every)
                        pops.append((pop_ns + ack_ns) / got / 1000)
                        print(f"  pop   {pops[-1]:.3f} us/msg (pops {pop_ns / got / 1000:.3f}, "
                              f"acks {ack_ns / got / 1000:.3f})", flush=True)  # fmt: skip
                    else:
                        got, pull_ns = await drain_pull(c, topic, args.messages)
                        pulls.append(pull_ns / got / 1000)
                        print(f"  pull  {pulls[-1]:.3f} us/msg", flush=True)
        finally:
            await c.shutdown()
    pop, pull = statistics.median(pops), statistics.median(pulls)
    print(
        f"handlers' CPU per consumed message: POP {pop:.3f} us (pop + batch ack every {args.acks_every} "
        f"pops), pull {pull:.3f} us; POP adds {pop - pull:.3f} us ({pop / pull:.2f} x pull's handler)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="backlog of one run")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds")
    parser.add_argument("--acks-every", type=int, default=8, help="pops per batch ack")
    asyncio.run(main(parser.parse_args()))
