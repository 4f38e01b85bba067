"""Send messages in transactions: one committed, one rolled back, one left UNKNOW that the broker's
check later commits.

python examples/transaction_producer.py -n 127.0.0.1:9876 -t TopicTest

The broker checks undecided transactions every ``transactionCheckInterval`` once they are older
than ``transactionTimeOut`` (30 s and 6 s by default): the UNKNOW one is committed by the check
after that, and the example waits for it (``--wait`` seconds at most).
"""

import argparse
import asyncio

from rocketpy import LocalTransactionState, Message, TransactionProducer


class OrderListener:
    """Local transactions keyed by the message's ``order`` property."""

    def __init__(self) -> None:
        self.checked = asyncio.Event()

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        # a plain method runs in the producer's worker threads, never on the event loop
        return {
            "commit": LocalTransactionState.COMMIT_MESSAGE,
            "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(str(arg), LocalTransactionState.UNKNOW)

    async def check_local_transaction(self, msg: Message) -> LocalTransactionState:
        # the broker asks about the transaction left UNKNOW; the local state says it committed
        print(f"check from the broker for {msg.properties['order']}: committing it")
        self.checked.set()
        return LocalTransactionState.COMMIT_MESSAGE


async def main(args: argparse.Namespace) -> None:
    listener = OrderListener()
    producer = TransactionProducer(args.group, namesrv_addr=args.namesrv, listener=listener)
    await producer.start()
    try:
        for state in ("commit", "rollback", "unknown"):
            msg = Message(args.topic, f"order {state}".encode(), tags="TagTxn", properties={"order": state})
            result = await producer.send_in_transaction(msg, arg=state)
            print(
                f"sent {state}: {result.status.name} transaction_id={result.transaction_id} "
                f"local state={result.local_transaction_state.name}"
            )
        await asyncio.wait_for(listener.checked.wait(), args.wait)
    finally:
        await producer.shutdown()  # waits for the answer to the check to be sent
    print(f"done: 2 of 3 transactional messages committed to {args.topic}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--namesrv", default="127.0.0.1:9876", help="NameServer address")
    parser.add_argument("-t", "--topic", default="TopicTest")
    parser.add_argument("-g", "--group", default="example_transaction_group")
    parser.add_argument("--wait", type=float, default=90.0, help="seconds to wait for the broker's check")
    asyncio.run(main(parser.parse_args()))
