import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * DefaultMQPushConsumer with a MessageSelector and a consume-from-where, until stdin closes. Arguments: namesrv,
 * group, topic, and optionally type (TAG | SQL92, default TAG), expression (default *), from (FIRST | LAST |
 * TIMESTAMP; default: the client's default, LAST), timestamp (yyyyMMddHHmmss, for TIMESTAMP), instance.
 * Emits "started", or "startFailed" (responseCode, message) when start() throws, which then exits; one
 * "received" per message; "stopped".
 */
public final class FilterConsume {
    private FilterConsume() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(Out.need(args, "group"));
        consumer.setNamesrvAddr(Out.need(args, "namesrv"));
        consumer.setInstanceName(args.getOrDefault("instance", "filter-" + ProcessHandle.current().pid()));
        consumer.setMqClientApiTimeout(Out.CLIENT_API_TIMEOUT_MS);
        String expression = args.getOrDefault("expression", "*");
        MessageSelector selector = "SQL92".equals(args.getOrDefault("type", "TAG"))
            ? MessageSelector.bySql(expression) : MessageSelector.byTag(expression);
        consumer.subscribe(Out.need(args, "topic"), selector);
        if (args.containsKey("from")) {
            String from = args.get("from");
            consumer.setConsumeFromWhere(ConsumeFromWhere.valueOf(
                "CONSUME_FROM_" + from + ("TIMESTAMP".equals(from) ? "" : "_OFFSET")));
        }
        if (args.containsKey("timestamp")) {
            consumer.setConsumeTimestamp(args.get("timestamp"));
        }
        consumer.setConsumeMessageBatchMaxSize(1);
        consumer.registerMessageListener((MessageListenerConcurrently) (List<MessageExt> msgs,
            org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext context) -> {
            for (MessageExt msg : msgs) {
                Out.emit("received", Out.describe(msg));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            consumer.start();
        } catch (MQClientException e) {
            Out.emit("startFailed", "responseCode", e.getResponseCode(), "errorMessage", e.getErrorMessage(),
                "message", e.getMessage());
            consumer.shutdown();
            return;
        }
        Out.emit("started", "clientId", consumer.buildMQClientId(),
            "consumeFromWhere", consumer.getConsumeFromWhere().name());
        while (System.in.read() >= 0) {
            // stdin closed = stop
        }
        consumer.shutdown();
        Out.emit("stopped");
    }
}
