import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.message.MessageQueue;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * DefaultMQPushConsumer until stdin closes (then shutdown). Arguments: namesrv, group, topic, and optionally
 * expression (tag expression, default *), model (CLUSTERING | BROADCASTING), orderly (true | false),
 * fail (never | always: RECONSUME_LATER every time), maxReconsumeTimes, from (FIRST | LAST | TIMESTAMP),
 * retryDelayLevel (the delay level asked for with RECONSUME_LATER; 0 = the broker's 3 + reconsumeTimes),
 * pollNameServerMs (route refresh period, default 30000), instance (instance name), extraTopic + extraExpression (a second subscription).
 * Emits "started", "allocated" when a topic's queues for this client change, one "received" per delivery
 * (with "thread"), "stopped".
 */
public final class PushConsume {
    private PushConsume() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(Out.need(args, "group"));
        consumer.setNamesrvAddr(Out.need(args, "namesrv"));
        consumer.setInstanceName(args.getOrDefault("instance", "push-" + ProcessHandle.current().pid()));
        consumer.setMqClientApiTimeout(Out.CLIENT_API_TIMEOUT_MS);
        consumer.subscribe(Out.need(args, "topic"), args.getOrDefault("expression", "*"));
        if (args.containsKey("extraTopic")) {
            consumer.subscribe(args.get("extraTopic"), args.getOrDefault("extraExpression", "*"));
        }
        consumer.setMessageModel(MessageModel.valueOf(args.getOrDefault("model", "CLUSTERING")));
        consumer.setConsumeFromWhere(ConsumeFromWhere.valueOf(
            "CONSUME_FROM_" + args.getOrDefault("from", "FIRST") + (args.getOrDefault("from", "FIRST").equals("TIMESTAMP") ? "" : "_OFFSET")));
        consumer.setPollNameServerInterval(Out.integer(args, "pollNameServerMs", 30000));
        consumer.setMaxReconsumeTimes(Out.integer(args, "maxReconsumeTimes", 16));
        consumer.setConsumeMessageBatchMaxSize(1);
        boolean fail = "always".equals(args.getOrDefault("fail", "never"));
        int retryDelayLevel = Out.integer(args, "retryDelayLevel", 0);
        consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueStrategy() {
            private final AllocateMessageQueueAveragely averagely = new AllocateMessageQueueAveragely();
            private final Map<String, List<Integer>> last = new ConcurrentHashMap<>();

            @Override
            public List<MessageQueue> allocate(String group, String clientId, List<MessageQueue> all, List<String> clients) {
                List<MessageQueue> mine = averagely.allocate(group, clientId, all, clients);
                List<Integer> ids = new ArrayList<>();
                for (MessageQueue mq : mine) {
                    ids.add(mq.getQueueId());
                }
                Collections.sort(ids);
                String topic = all.isEmpty() ? "" : all.get(0).getTopic();
                if (!ids.equals(last.put(topic, ids))) {
                    Out.emit("allocated", "topic", topic, "queueIds", ids, "clients", clients.size());
                }
                return mine;
            }

            @Override
            public String getName() {
                return "AVG_LOGGED";
            }
        });
        AtomicInteger deliveries = new AtomicInteger();
        if (Boolean.parseBoolean(args.getOrDefault("orderly", "false"))) {
            consumer.registerMessageListener((MessageListenerOrderly) (List<MessageExt> msgs, org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyContext context) -> {
                for (MessageExt msg : msgs) {
                    Out.emit("received", Out.concat(Out.describe(msg), "thread", Thread.currentThread().getName(),
                        "delivery", deliveries.incrementAndGet()));
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (List<MessageExt> msgs, org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext context) -> {
                for (MessageExt msg : msgs) {
                    Out.emit("received", Out.concat(Out.describe(msg), "thread", Thread.currentThread().getName(),
                        "delivery", deliveries.incrementAndGet()));
                }
                if (retryDelayLevel > 0) {
                    context.setDelayLevelWhenNextConsume(retryDelayLevel);
                }
                return fail ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        consumer.start();
        Out.emit("started", "clientId", consumer.buildMQClientId());
        while (System.in.read() >= 0) {
            // stdin closed = stop
        }
        consumer.shutdown();
        Out.emit("stopped");
    }
}
