// RocketMQ's official 5.x Node.js client (npm install rocketmq-client-nodejs) sending to rocketpy.
//   npm install rocketmq-client-nodejs
//   .venv/bin/mqadmin updateTopic -n 127.0.0.1:9876 -t Rmq5Topic -c DefaultCluster
//   node examples/rocketmq5/producer.js [ENDPOINT [TOPIC]]
// ENDPOINT is any broker's gRPC endpoint (grpcServerPort, 8081 in conf/broker.properties).
const { Producer } = require('rocketmq-client-nodejs');

const endpoints = process.argv[2] || '127.0.0.1:8081';
const topic = process.argv[3] || 'Rmq5Topic';

async function main() {
  const producer = new Producer({ endpoints, namespace: '', topics: [topic] });
  await producer.startup();
  try {
    const receipt = await producer.send({
      topic, tag: 'TagA', keys: ['order-1'], body: Buffer.from('hello from a RocketMQ 5 client'),
      properties: new Map([['region', 'eu']]),
    });
    console.log('normal:', receipt.messageId);
    const later = await producer.send({
      topic, body: Buffer.from('in 10 seconds'), deliveryTimestamp: new Date(Date.now() + 10000),
    });
    console.log('delay: ', later.messageId);
  } finally {
    await producer.shutdown();
  }
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
