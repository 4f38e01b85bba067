// Runs RocketMQ's official 5.x Node.js client (npm rocketmq-client-nodejs) against a rocketpy broker.
// Started by test_rocketmq5_clients.py with NODE_PATH pointing at the installed package; prints one
// JSON document on stdout. argv: MODE ENDPOINT TOPIC; modes as rmq5_python_worker.py (normal, fifo,
// delay, transaction). The Node.js client takes milliseconds where the Python client takes seconds.
'use strict';
const { Producer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [mode, endpoint, topic] = process.argv.slice(2);
const CHECK_WAIT_MS = 60000;
const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {} };

function message(body, extra) {
  return {
    topic, tag: 'TagA', keys: [`key-${body}`], body: Buffer.from(body),
    properties: new Map([['color', 'blue']]), ...extra,
  };
}

async function main() {
  const checked = [];
  let resolveChecked;
  const checkedOnce = new Promise((resolve) => { resolveChecked = resolve; });
  const checker = {
    async check(view) {
      checked.push(view.messageId);
      resolveChecked();
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer({ endpoints: endpoint, namespace: '', topics: [topic], logger: silent, checker });
  await producer.startup();
  const out = { sent: [] };
  try {
    if (mode === 'normal') {
      for (let i = 0; i < 3; i++) {
        const r = await producer.send(message(`n${i}`));
        out.sent.push({ id: r.messageId, offset: Number(r.offset), body: `n${i}` });
      }
    } else if (mode === 'fifo') {
      for (let i = 0; i < 6; i++) {
        const r = await producer.send(message(`f${i}`, { messageGroup: `g${i % 2}` }));
        out.sent.push({ id: r.messageId, group: `g${i % 2}`, body: `f${i}` });
      }
    } else if (mode === 'delay') {
      const at = Date.now() + 3000;
      const r = await producer.send(message('d0', { deliveryTimestamp: new Date(at) }));
      out.sent.push({ id: r.messageId, body: 'd0', deliver_at: at / 1000 });
    } else if (mode === 'transaction') {
      for (const [body, decide] of [['t-commit', 'commit'], ['t-rollback', 'rollback'], ['t-check', null]]) {
        const tx = producer.beginTransaction();
        const r = await producer.send(message(body), tx);
        if (decide === 'commit') await tx.commit();
        if (decide === 'rollback') await tx.rollback();
        out.sent.push({ id: r.messageId, body, transaction_id: r.transactionId });
      }
      const timer = new Promise((resolve) => setTimeout(resolve, CHECK_WAIT_MS));
      await Promise.race([checkedOnce, timer]);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      out.checked = checked;
    }
  } finally {
    await producer.shutdown();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
