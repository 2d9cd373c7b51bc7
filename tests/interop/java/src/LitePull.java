import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingTimeoutException;

/**
 * DefaultLitePullConsumer. Arguments: namesrv, group, topic, mode (subscribe | assign), count (stop after this many
 * messages), and optionally expression (subscribe), from (FIRST | LAST), seek (assign: seek every queue to this
 * offset), seekToBegin (assign), commit (true: commitSync after polling, autoCommit off), timeoutMs.
 * Emits "queues" (assign), one "received" per message, "committed", "done" (with the count).
 */
public final class LitePull {
    private LitePull() {
    }

    private static final int SEEK_ATTEMPTS = 3;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String topic = Out.need(args, "topic");
        String mode = Out.need(args, "mode");
        int count = Out.integer(args, "count", 1);
        long deadline = System.currentTimeMillis() + Out.longValue(args, "timeoutMs", 30000);
        boolean commit = Boolean.parseBoolean(args.getOrDefault("commit", "false"));
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(Out.need(args, "group"));
        consumer.setNamesrvAddr(Out.need(args, "namesrv"));
        consumer.setInstanceName("lite-" + ProcessHandle.current().pid());
        consumer.setAutoCommit(!commit);
        consumer.setPollTimeoutMillis(1000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.valueOf(
            "CONSUME_FROM_" + args.getOrDefault("from", "FIRST") + "_OFFSET"));
        if (mode.equals("subscribe")) {
            consumer.subscribe(topic, args.getOrDefault("expression", "*"));
            consumer.start();
        } else {
            consumer.start();
            try {
                assign(consumer, topic, args);
            } catch (Exception e) {  // as an event: the test shows why (a seek outside a queue's offsets, say)
                Out.error("assign", e);
                consumer.shutdown();
                Out.emit("done", "count", 0);
                return;
            }
        }
        int received = 0;
        try {
            while (received < count && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll();
                for (MessageExt msg : batch) {
                    received++;
                    Out.emit("received", Out.describe(msg));
                }
            }
            if (commit) {
                consumer.commitSync();
                Out.emit("committed");
            }
        } catch (Exception e) {
            Out.error("poll", e);
        } finally {
            consumer.shutdown();
        }
        Out.emit("done", "count", received);
    }

    /** assign(all queues of the topic, sorted), then seek or seekToBegin each if asked; emits "queues". */
    private static void assign(DefaultLitePullConsumer consumer, String topic, Map<String, String> args)
        throws MQClientException {
        Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
        List<MessageQueue> sorted = new ArrayList<>(queues);
        sorted.sort(null);
        consumer.assign(sorted);
        List<Integer> ids = new ArrayList<>();
        for (MessageQueue mq : sorted) {
            ids.add(mq.getQueueId());
            if (args.containsKey("seek")) {
                seek(consumer, mq, Long.parseLong(args.get("seek")));
            } else if (Boolean.parseBoolean(args.getOrDefault("seekToBegin", "false"))) {
                consumer.seekToBegin(mq);
            }
        }
        Out.emit("queues", "queueIds", ids);
    }

    /**
     * consumer.seek, tried again (at most SEEK_ATTEMPTS times) when its min/max offset request timed out: the
     * client's admin timeout is a few seconds, which a loaded CI machine can take from a JVM thread. Any other
     * failure is thrown.
     */
    private static void seek(DefaultLitePullConsumer consumer, MessageQueue mq, long offset) throws MQClientException {
        for (int attempt = 1; ; attempt++) {
            try {
                consumer.seek(mq, offset);
                return;
            } catch (MQClientException e) {
                if (attempt >= SEEK_ATTEMPTS || !(e.getCause() instanceof RemotingTimeoutException)) {
                    throw e;
                }
                Out.emit("retried", "what", "seek", "queueId", mq.getQueueId(), "message", String.valueOf(e.getMessage()));
            }
        }
    }
}
