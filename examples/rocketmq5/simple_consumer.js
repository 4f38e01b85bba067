// RocketMQ's official 5.x Node.js client's SimpleConsumer receiving from rocketpy (run producer.js first).
//   node examples/rocketmq5/simple_consumer.js [ENDPOINT [TOPIC [GROUP]]]
// It receives until a receive comes back empty, acking each message. Times are milliseconds.
const { SimpleConsumer } = require('rocketmq-client-nodejs');

const endpoints = process.argv[2] || '127.0.0.1:8081';
const topic = process.argv[3] || 'Rmq5Topic';
const consumerGroup = process.argv[4] || 'Rmq5SimpleGroup';

async function main() {
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup, subscriptions: new Map([[topic, '*']]), awaitDuration: 5000,
  });
  await consumer.startup();
  try {
    for (;;) {
      const msgs = await consumer.receive(16, 15000); // invisible for 15 s (10 s at least)
      if (msgs.length === 0) break;
      for (const msg of msgs) {
        console.log('received:', msg.messageId, msg.body.toString());
        await consumer.ack(msg); // or consumer.changeInvisibleDuration(msg, 60000) to take longer
      }
    }
  } finally {
    await consumer.shutdown();
  }
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
