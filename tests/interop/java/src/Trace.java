import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Message traces (enableMsgTrace=true, AsyncTraceDispatcher). Arguments: namesrv, topic, group, count, and optionally
 * traceTopic (the customized trace topic; default RMQ_SYS_TRACE_TOPIC). A traced producer sends `count` messages with
 * keys key-i and one committed transactional message; a traced push consumer consumes them all; then both shut down
 * (which flushes their trace dispatchers). Emits "sent" (and "sentTransaction"), "received", "done".
 */
public final class Trace {
    private Trace() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String namesrv = Out.need(args, "namesrv");
        String topic = Out.need(args, "topic");
        String group = Out.need(args, "group");
        String traceTopic = args.get("traceTopic");
        int count = Out.integer(args, "count", 3);
        Set<String> pending = ConcurrentHashMap.newKeySet();

        DefaultMQProducer producer = new DefaultMQProducer(group + "_producer", true, traceTopic);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("trace-producer-" + ProcessHandle.current().pid());
        producer.start();
        for (int i = 0; i < count; i++) {
            Message msg = new Message(topic, "TagT", "key-" + i, ("traced-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(msg);
            pending.add(result.getMsgId());
            Out.emit("sent", "msgId", result.getMsgId(), "offsetMsgId", result.getOffsetMsgId(), "keys", msg.getKeys(),
                "status", result.getSendStatus().name());
        }

        TransactionMQProducer transactional = new TransactionMQProducer(null, group + "_tx", null, true, traceTopic);
        transactional.setNamesrvAddr(namesrv);
        transactional.setInstanceName("trace-tx-" + ProcessHandle.current().pid());
        transactional.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        transactional.start();
        Message txMessage = new Message(topic, "TagTx", "key-tx", "traced-tx".getBytes(StandardCharsets.UTF_8));
        SendResult txResult = transactional.sendMessageInTransaction(txMessage, null);
        pending.add(txResult.getMsgId());
        Out.emit("sentTransaction", "msgId", txResult.getMsgId(), "status", txResult.getSendStatus().name());

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, true, traceTopic);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("trace-consumer-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                pending.remove(msg.getMsgId());
                Out.emit("received", "msgId", msg.getMsgId(), "keys", msg.getKeys());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + Out.longValue(args, "timeoutMs", 60000);
        while (!pending.isEmpty() && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        Thread.sleep(2000);  // SubAfter records are queued after the listener returns; let the dispatchers send
        consumer.shutdown();
        transactional.shutdown();
        producer.shutdown();
        Out.emit("done", "unconsumed", pending.size());
    }
}
