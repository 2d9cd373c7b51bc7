'use strict';
// ali-ons 3.12 (a Node.js RocketMQ remoting client) for tests/interop/node: one JSON line per event on
// stdout (the client's own log lines start otherwise). Installed by tests/interop/node/conftest.py.
//
//   node client.js produce NAMESRV TOPIC COUNT
//       COUNT sends (tag TagN, key nk<i>, body node-<i>), then one with a start-deliver time 2 s ahead.
//   node client.js consume NAMESRV TOPIC GROUP EXPECT TIMEOUT_S RETRY_BODY
//       a clustering push consumer from the first offset; the first delivery of RETRY_BODY answers
//       ACTION_RETRY; stops after EXPECT consumed (successful) messages or TIMEOUT_S.
const httpclient = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');

const ROUTE_POLL_MS = 1000; // pollNameServerInteval: find %RETRY%<group> soon after the heartbeat made it

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function options(namesrv, extra) {
  // No credentials: ali-ons signs with empty keys, as the C++ client does.
  return { httpclient, nameSrv: namesrv, accessKeyId: '', accessKeySecret: '', pollNameServerInteval: ROUTE_POLL_MS, ...extra };
}

async function produce(namesrv, topic, count) {
  const producer = new Producer(options(namesrv, { producerGroup: 'node_interop_producer' }));
  await producer.ready();
  const sent = (kind, body, result) => emit('sent', {
    kind, body, status: result.sendStatus, msgId: result.msgId,
    queueId: result.messageQueue.queueId, queueOffset: result.queueOffset,
  });
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, 'TagN', `node-${i}`);
    msg.keys = [ `nk${i}` ];
    sent('plain', `node-${i}`, await producer.send(msg));
  }
  const timed = new Message(topic, 'TagN', 'node-timed');
  timed.setStartDeliverTime(Date.now() + 2000);
  sent('timed', 'node-timed', await producer.send(timed));
  await producer.close();
  emit('done', {});
}

async function consume(namesrv, topic, group, expect, timeoutS, retryBody) {
  const consumer = new Consumer(options(namesrv, {
    consumerGroup: group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  }));
  let consumed = 0;
  let retried = false;
  consumer.subscribe(topic, '*', async msg => {
    const fields = {
      body: msg.body.toString(), tags: msg.tags, keys: msg.keys, msgId: msg.msgId, topic: msg.topic,
      reconsumeTimes: msg.reconsumeTimes, queueId: msg.queueId, queueOffset: msg.queueOffset,
      bornTimestamp: Number(msg.bornTimestamp), storeTimestamp: Number(msg.storeTimestamp),
      originMessageId: msg.properties.ORIGIN_MESSAGE_ID || null,
    };
    if (fields.body === retryBody && !retried) {
      retried = true;
      emit('retry', fields);
      return Consumer.ACTION_RETRY;
    }
    consumed++;
    emit('received', fields);
  });
  consumer.on('error', err => emit('clientError', { message: err.message }));
  await consumer.ready();
  const deadline = Date.now() + timeoutS * 1000;
  while (consumed < expect && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  await consumer.close();
  emit('done', { consumed });
}

const [ command, ...args ] = process.argv.slice(2);
const run = command === 'produce' ? () => produce(args[0], args[1], Number(args[2]))
  : command === 'consume' ? () => consume(args[0], args[1], args[2], Number(args[3]), Number(args[4]), args[5])
    : () => Promise.reject(new Error(`unknown command ${command}`));
run().then(() => process.exit(0), err => {
  emit('error', { message: String(err && err.stack || err) });
  process.exit(1);
});
