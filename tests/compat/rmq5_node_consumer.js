// Runs RocketMQ's official 5.x Node.js client's consumers (npm rocketmq-client-nodejs) against a rocketpy
// broker. Started by test_rocketmq5_clients.py with NODE_PATH pointing at the installed package; prints one
// JSON document on stdout. argv: MODE ENDPOINT TOPIC GROUP COUNT; modes as rmq5_python_consumer.py (simple,
// push). The Node.js client takes milliseconds where the Python client takes seconds.
'use strict';
const { SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const [mode, endpoint, topic, group, countText] = process.argv.slice(2);
const count = Number(countText);
const WAIT_MS = 90000;
const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {} };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function view(msg) {
  return {
    id: msg.messageId, body: msg.body.toString(), attempt: msg.deliveryAttempt, tag: msg.tag,
    group: msg.messageGroup, props: Object.fromEntries(msg.properties),
  };
}

async function simple() {
  const consumer = new SimpleConsumer({
    endpoints: endpoint, namespace: '', consumerGroup: group, logger: silent,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
  });
  await consumer.startup();
  const received = [];
  let changed = null;
  try {
    const deadline = Date.now() + WAIT_MS;
    while (received.length < count && Date.now() < deadline) {
      for (const msg of await consumer.receive(32, 15000)) {
        if (changed === null) {
          const before = msg.receiptHandle;
          await consumer.changeInvisibleDuration(msg, 20000);
          changed = { id: msg.messageId, new_handle: msg.receiptHandle !== before };
        }
        await consumer.ack(msg);
        received.push(view(msg));
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { received, changed };
}

async function push() {
  const seen = [];
  let resolveDone;
  const done = new Promise((resolve) => { resolveDone = resolve; });
  const messageListener = {
    consume(msg) {
      const v = view(msg);
      const failing = v.body === 'fail-once' && !seen.some((s) => s.body === 'fail-once');
      v.result = failing ? 'FAILURE' : 'SUCCESS';
      seen.push(v);
      if (seen.filter((s) => s.result === 'SUCCESS').length >= count) resolveDone(true);
      return failing ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
    },
  };
  const consumer = new PushConsumer({
    endpoints: endpoint, namespace: '', consumerGroup: group, logger: silent,
    subscriptions: new Map([[topic, '*']]), messageListener,
  });
  await consumer.startup();
  let finished = false;
  try {
    finished = await Promise.race([done, sleep(WAIT_MS).then(() => false)]);
    await sleep(1000);
  } finally {
    await consumer.shutdown();
  }
  return { consumed: seen, finished };
}

(mode === 'simple' ? simple() : push())
  .then((out) => {
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
  })
  .catch((err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  });
