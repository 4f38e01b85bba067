// RocketMQ's official 5.x Node.js client's PushConsumer consuming from rocketpy (run producer.js first).
//   node examples/rocketmq5/push_consumer.js [ENDPOINT [TOPIC [GROUP [SECONDS]]]]
// It consumes for SECONDS (20), then shuts down.
const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const endpoints = process.argv[2] || '127.0.0.1:8081';
const topic = process.argv[3] || 'Rmq5Topic';
const consumerGroup = process.argv[4] || 'Rmq5PushGroup';
const seconds = Number(process.argv[5] || 20);

async function main() {
  const consumer = new PushConsumer({
    endpoints, namespace: '', consumerGroup, subscriptions: new Map([[topic, '*']]),
    messageListener: {
      consume(msg) {
        console.log('consumed:', msg.messageId, msg.body.toString());
        return ConsumeResult.SUCCESS; // FAILURE: delivered again at once (this client has no retry delay)
      },
    },
  });
  await consumer.startup();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  await consumer.shutdown();
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
