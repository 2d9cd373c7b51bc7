import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Admin through the client API. Arguments: namesrv, op, and per op:
 * createTopic: broker (address), topic, queues;  deleteExpiredCommitLog: broker (emits "deleteRequested" with
 * DefaultMQAdminExt.deleteExpiredCommitLogByAddr's boolean);
 * queryByKey: topic, key, beginMs, endMs;  viewById: topic, msgId;
 * searchOffset: topic, timestampMs (every queue: searchOffset, minOffset, maxOffset, earliestMsgStoreTime).
 */
public final class Admin {
    private Admin() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String op = Out.need(args, "op");
        String namesrv = Out.need(args, "namesrv");
        try {
            switch (op) {
                case "createTopic": {
                    DefaultMQAdminExt admin = new DefaultMQAdminExt();
                    admin.setNamesrvAddr(namesrv);
                    admin.setInstanceName("admin-" + ProcessHandle.current().pid());
                    admin.start();
                    try {
                        TopicConfig config = new TopicConfig(Out.need(args, "topic"));
                        config.setReadQueueNums(Out.integer(args, "queues", 8));
                        config.setWriteQueueNums(Out.integer(args, "queues", 8));
                        admin.createAndUpdateTopicConfig(Out.need(args, "broker"), config);
                        Out.emit("created", "topic", config.getTopicName());
                    } finally {
                        admin.shutdown();
                    }
                    break;
                }
                case "deleteExpiredCommitLog": {
                    DefaultMQAdminExt admin = new DefaultMQAdminExt();
                    admin.setNamesrvAddr(namesrv);
                    admin.setInstanceName("admin-" + ProcessHandle.current().pid());
                    admin.start();
                    try {
                        Out.emit("deleteRequested", "ok", admin.deleteExpiredCommitLogByAddr(Out.need(args, "broker")));
                    } finally {
                        admin.shutdown();
                    }
                    break;
                }
                default:
                    clientApi(op, namesrv, args);
            }
        } catch (Exception e) {
            Out.error(op, e);
        }
        Out.emit("done");
    }

    /** The MQAdmin methods every client has (here a DefaultMQProducer). */
    static void clientApi(String op, String namesrv, Map<String, String> args) throws Exception {
        DefaultMQProducer client = new DefaultMQProducer("interop_admin_api");
        client.setNamesrvAddr(namesrv);
        client.setInstanceName("adminapi-" + ProcessHandle.current().pid());
        client.start();
        try {
            String topic = Out.need(args, "topic");
            switch (op) {
                case "queryByKey": {
                    QueryResult result = client.queryMessage(topic, Out.need(args, "key"), 32,
                        Out.longValue(args, "beginMs", 0), Out.longValue(args, "endMs", Long.MAX_VALUE));
                    for (MessageExt msg : result.getMessageList()) {
                        Out.emit("found", Out.describe(msg));
                    }
                    break;
                }
                case "viewById": {
                    MessageExt msg = client.viewMessage(topic, Out.need(args, "msgId"));
                    Out.emit("found", Out.describe(msg));
                    break;
                }
                case "searchOffset": {
                    List<MessageQueue> queues = new ArrayList<>(client.fetchPublishMessageQueues(topic));
                    queues.sort(null);
                    long timestamp = Out.longValue(args, "timestampMs", 0);
                    for (MessageQueue mq : queues) {
                        Out.emit("queue", "queueId", mq.getQueueId(), "searchOffset", client.searchOffset(mq, timestamp),
                            "minOffset", client.minOffset(mq), "maxOffset", client.maxOffset(mq),
                            "earliestMsgStoreTime", client.earliestMsgStoreTime(mq));
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        } finally {
            client.shutdown();
        }
    }
}
