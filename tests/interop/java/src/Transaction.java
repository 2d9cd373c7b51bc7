import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * TransactionMQProducer. Arguments: namesrv, group, topic, actions (comma list, one message per entry, each
 * COMMIT_MESSAGE | ROLLBACK_MESSAGE | UNKNOW: what executeLocalTransaction answers), checkAnswer (what
 * checkLocalTransaction answers, default COMMIT_MESSAGE), waitChecks (keep running until this many checks
 * arrived, then lingerMs more, default 2000, for the answer to leave), timeoutMs. With actions empty it only answers checks (a second producer of the group).
 * Emits "sent" per message (with transactionId), "checked" per check, "done".
 */
public final class Transaction {
    private Transaction() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String topic = Out.need(args, "topic");
        String actionList = args.getOrDefault("actions", "");
        String[] actions = actionList.isEmpty() ? new String[0] : actionList.split(",");
        LocalTransactionState checkAnswer = LocalTransactionState.valueOf(args.getOrDefault("checkAnswer", "COMMIT_MESSAGE"));
        int waitChecks = Out.integer(args, "waitChecks", 0);
        long deadline = System.currentTimeMillis() + Out.longValue(args, "timeoutMs", 60000);
        Map<String, Integer> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer(Out.need(args, "group"));
        producer.setNamesrvAddr(Out.need(args, "namesrv"));
        producer.setInstanceName("tx-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(10000);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.valueOf(msg.getUserProperty("action"));
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.merge(msg.getTransactionId(), 1, Integer::sum);
                Out.emit("checked", Out.concat(Out.describe(msg), "transactionId", msg.getTransactionId(),
                    "answer", checkAnswer.name()));
                return checkAnswer;
            }
        });
        producer.start();
        Out.emit("started");
        try {
            for (int i = 0; i < actions.length; i++) {
                Message msg = new Message(topic, ("tx-" + i + "-" + actions[i]).getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("action", actions[i]);
                msg.setKeys("tx-" + i);
                TransactionSendResult result = producer.sendMessageInTransaction(msg, null);
                Out.emit("sent", "index", i, "action", actions[i], "status", result.getSendStatus().name(),
                    "msgId", result.getMsgId(), "transactionId", result.getTransactionId(),
                    "localState", String.valueOf(result.getLocalTransactionState()));
            }
            while (checks.size() < waitChecks && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            if (waitChecks > 0) {
                // the check's answer goes out as a oneway END_TRANSACTION after checkLocalTransaction returns:
                // give it time to leave before shutdown closes the channel
                Thread.sleep(Out.longValue(args, "lingerMs", 2000));
            }
        } catch (Exception e) {
            Out.error("transaction", e);
        } finally {
            producer.shutdown();
        }
        Out.emit("done", "checks", checks.size());
    }
}
