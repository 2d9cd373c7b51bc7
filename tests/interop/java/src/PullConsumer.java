import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.impl.FindBrokerResult;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * DefaultMQPullConsumer (deprecated in 4.9.7, still used). Arguments: namesrv, group, topic, and optionally
 * expression (default *), type (TAG | SQL92), op:
 *   drain (default): fetchSubscribeMessageQueues, then per queue fetchConsumeOffset(mq, true) and pull from there
 *     (a negative offset: from 0) until NO_NEW_MSG; with commit=true, updateConsumeOffset + persist(mq) at the end.
 *   block: pullBlockIfNotFound on queue `queueId` (default 0) at its max offset, once.
 * A SQL92 pull is refused by the 4.9.7 client itself until it has sent the broker a heartbeat (it reads the
 * broker's version from the heartbeat's answer; the pull consumer sends its first one a second after start), so
 * with type=SQL92 the program learns the route and heartbeats first, as a long-running application would have.
 * Emits "queues", per queue "offset" (the stored one), "pulled" per pull, "received" per message,
 * "committed" per queue, "done"; "error" on an exception.
 */
public final class PullConsumer {
    private static final long HEARTBEAT_WAIT_MS = 10_000;

    private PullConsumer() {
    }

    private static boolean versionsKnown(MQClientInstance client, List<MessageQueue> queues) {
        for (MessageQueue mq : queues) {
            FindBrokerResult found = client.findBrokerAddressInSubscribe(mq.getBrokerName(), MixAll.MASTER_ID, true);
            if (found == null || found.getBrokerVersion() == 0) {
                return false;
            }
        }
        return true;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String topic = Out.need(args, "topic");
        String expression = args.getOrDefault("expression", "*");
        boolean sql = "SQL92".equals(args.getOrDefault("type", "TAG"));
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(Out.need(args, "group"));
        consumer.setNamesrvAddr(Out.need(args, "namesrv"));
        consumer.setInstanceName("pull-" + ProcessHandle.current().pid());
        consumer.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            queues.sort(Comparator.comparingInt(MessageQueue::getQueueId));
            List<Integer> ids = new ArrayList<>();
            for (MessageQueue mq : queues) {
                ids.add(mq.getQueueId());
            }
            Out.emit("queues", "queueIds", ids);
            if (sql) {
                MQClientInstance client = MQClientManager.getInstance().getOrCreateMQClientInstance(consumer);
                client.updateTopicRouteInfoFromNameServer(topic);
                // The heartbeat is skipped when the client's own scheduled one holds the lock, so heartbeat
                // until every queue's broker version is known, as the pull's check reads it.
                long deadline = System.currentTimeMillis() + HEARTBEAT_WAIT_MS;
                while (!versionsKnown(client, queues)) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("no heartbeat answer within " + HEARTBEAT_WAIT_MS + " ms");
                    }
                    client.sendHeartbeatToAllBrokerWithLock();
                    Thread.sleep(20);
                }
            }
            if ("block".equals(args.getOrDefault("op", "drain"))) {
                MessageQueue mq = queues.get(Out.integer(args, "queueId", 0));
                long offset = consumer.maxOffset(mq);
                Out.emit("blocking", "queueId", mq.getQueueId(), "offset", offset);
                long started = System.currentTimeMillis();
                PullResult result = consumer.pullBlockIfNotFound(mq, expression, offset, 32);
                report(mq, result);
                Out.emit("unblocked", "elapsedMs", System.currentTimeMillis() - started);
            } else {
                boolean commit = Boolean.parseBoolean(args.getOrDefault("commit", "false"));
                for (MessageQueue mq : queues) {
                    long stored = consumer.fetchConsumeOffset(mq, true);
                    Out.emit("offset", "queueId", mq.getQueueId(), "offset", stored);
                    long offset = Math.max(stored, 0);
                    while (true) {
                        PullResult result = sql
                            ? consumer.pull(mq, MessageSelector.bySql(expression), offset, 32)
                            : consumer.pull(mq, expression, offset, 32);
                        report(mq, result);
                        if (result.getPullStatus() == PullStatus.NO_NEW_MSG
                            || result.getPullStatus() == PullStatus.OFFSET_ILLEGAL) {
                            break;
                        }
                        offset = result.getNextBeginOffset();
                    }
                    if (commit) {
                        consumer.updateConsumeOffset(mq, offset);
                        consumer.persist(mq);
                        Out.emit("committed", "queueId", mq.getQueueId(), "offset", offset);
                    }
                }
            }
        } catch (Exception e) {
            Out.error("pull", e);
        }
        consumer.shutdown();
        Out.emit("done");
    }

    static void report(MessageQueue mq, PullResult result) {
        List<MessageExt> found = result.getMsgFoundList();
        Out.emit("pulled", "queueId", mq.getQueueId(), "status", result.getPullStatus().name(),
            "nextBeginOffset", result.getNextBeginOffset(), "minOffset", result.getMinOffset(),
            "maxOffset", result.getMaxOffset(), "count", found == null ? 0 : found.size());
        if (found != null) {
            for (MessageExt msg : found) {
                Out.emit("received", Out.describe(msg));
            }
        }
    }
}
