import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * DefaultMQProducer flows. Arguments (key=value): namesrv, group, topic, mode (sync | async | oneway | batch |
 * ordered), count, and optionally tags, keys (a prefix: key i is prefix-i), prop (name:value, a user property),
 * bodySize + compressible (generated bodies instead of "body-i"), compressOver, maxMessageSize, delayLevel,
 * orderKeys (ordered: number of order ids; message i goes with id i % orderKeys).
 * Emits one "sent" per message (sync, async, ordered, batch), "error" per failure, then "done".
 */
public final class Produce {
    private Produce() {
    }

    static Message message(Map<String, String> args, String topic, int i) {
        int bodySize = Out.integer(args, "bodySize", -1);
        byte[] body = bodySize < 0
            ? ("body-" + i).getBytes(StandardCharsets.UTF_8)
            : Out.body(bodySize, Boolean.parseBoolean(args.getOrDefault("compressible", "false")), i);
        Message msg = new Message(topic, body);
        if (args.containsKey("tags")) {
            String[] tags = args.get("tags").split(",");
            msg.setTags(tags[i % tags.length]);
        }
        if (args.containsKey("keys")) {
            msg.setKeys(args.get("keys") + "-" + i);
        }
        if (args.containsKey("prop")) {
            String[] prop = args.get("prop").split(":", 2);
            msg.putUserProperty(prop[0], prop[1]);
            msg.putUserProperty("index", String.valueOf(i));
        }
        if (args.containsKey("delayLevel")) {
            msg.setDelayTimeLevel(Integer.parseInt(args.get("delayLevel")));
        }
        return msg;
    }

    static void sent(int index, SendResult result, Message msg) {
        Out.emit("sent", "index", index, "status", result.getSendStatus().name(), "msgId", result.getMsgId(),
            "offsetMsgId", result.getOffsetMsgId(), "queueId", result.getMessageQueue().getQueueId(),
            "queueOffset", result.getQueueOffset(), "broker", result.getMessageQueue().getBrokerName(),
            "bodySha256", Out.sha256(msg.getBody()), "keys", msg.getKeys(), "tags", msg.getTags());
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String topic = Out.need(args, "topic");
        String mode = Out.need(args, "mode");
        int count = Out.integer(args, "count", 1);
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "interop_producer"));
        producer.setNamesrvAddr(Out.need(args, "namesrv"));
        producer.setInstanceName("produce-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(Out.integer(args, "sendTimeout", 10000));
        producer.setCompressMsgBodyOverHowmuch(Out.integer(args, "compressOver", 4096));
        producer.setMaxMessageSize(Out.integer(args, "maxMessageSize", 4 * 1024 * 1024));
        producer.setRetryTimesWhenSendFailed(Out.integer(args, "retries", 2));
        producer.start();
        Out.emit("started", "vipChannelEnabled", producer.isVipChannelEnabled(),
            "compressMsgBodyOverHowmuch", producer.getCompressMsgBodyOverHowmuch(),
            "maxMessageSize", producer.getMaxMessageSize());
        try {
            switch (mode) {
                case "sync":
                    for (int i = 0; i < count; i++) {
                        Message msg = message(args, topic, i);
                        try {
                            sent(i, producer.send(msg), msg);
                        } catch (Exception e) {
                            Out.error("send " + i, e);
                        }
                    }
                    break;
                case "async": {
                    CountDownLatch callbacks = new CountDownLatch(count);
                    for (int i = 0; i < count; i++) {
                        final int index = i;
                        final Message msg = message(args, topic, i);
                        producer.send(msg, new SendCallback() {
                            @Override
                            public void onSuccess(SendResult result) {
                                sent(index, result, msg);
                                callbacks.countDown();
                            }

                            @Override
                            public void onException(Throwable e) {
                                Out.error("async send " + index, e);
                                callbacks.countDown();
                            }
                        });
                    }
                    if (!callbacks.await(60, TimeUnit.SECONDS)) {
                        Out.emit("error", "where", "async", "message", callbacks.getCount() + " callbacks missing");
                    }
                    break;
                }
                case "oneway":
                    for (int i = 0; i < count; i++) {
                        producer.sendOneway(message(args, topic, i));
                    }
                    break;
                case "batch": {
                    List<Message> batch = new ArrayList<>();
                    for (int i = 0; i < count; i++) {
                        batch.add(message(args, topic, i));
                    }
                    SendResult result = producer.send(batch);
                    Out.emit("sent", "index", -1, "status", result.getSendStatus().name(), "msgId", result.getMsgId(),
                        "offsetMsgId", result.getOffsetMsgId(), "queueId", result.getMessageQueue().getQueueId(),
                        "queueOffset", result.getQueueOffset());
                    break;
                }
                case "ordered": {
                    int orderKeys = Out.integer(args, "orderKeys", 4);
                    MessageQueueSelector selector = (List<MessageQueue> mqs, Message msg, Object arg) ->
                        mqs.get((Integer) arg % mqs.size());
                    for (int i = 0; i < count; i++) {
                        Message msg = message(args, topic, i);
                        msg.putUserProperty("orderId", String.valueOf(i % orderKeys));
                        sent(i, producer.send(msg, selector, i % orderKeys), msg);
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception e) {
            Out.error(mode, e);
        } finally {
            producer.shutdown();
        }
        Out.emit("done");
    }
}
