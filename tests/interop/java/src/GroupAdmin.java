import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Consumer-group administration through DefaultMQAdminExt (rocketmq-tools). Arguments: namesrv, op, and per op:
 * resetByTime: topic, group, timestampMs (-1 = now: each queue's max offset), force (default true).
 * Emits one "reset" per queue of the answered offset table (sorted), or "error" with the response code, then "done".
 */
public final class GroupAdmin {
    private GroupAdmin() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String op = Out.need(args, "op");
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(Out.need(args, "namesrv"));
        admin.setInstanceName("groupadmin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            switch (op) {
                case "resetByTime": {
                    Map<MessageQueue, Long> table = admin.resetOffsetByTimestamp(Out.need(args, "topic"),
                        Out.need(args, "group"), Out.longValue(args, "timestampMs", -1),
                        Boolean.parseBoolean(args.getOrDefault("force", "true")));
                    List<MessageQueue> queues = new ArrayList<>(table.keySet());
                    queues.sort(null);
                    for (MessageQueue mq : queues) {
                        Out.emit("reset", "topic", mq.getTopic(), "broker", mq.getBrokerName(), "queueId", mq.getQueueId(),
                            "offset", table.get(mq));
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        } catch (MQClientException e) {
            Out.emit("error", "where", op, "code", e.getResponseCode(), "message", e.getErrorMessage());
        } catch (MQBrokerException e) {
            Out.emit("error", "where", op, "code", e.getResponseCode(), "message", e.getErrorMessage());
        } finally {
            admin.shutdown();
        }
        Out.emit("done");
    }
}
