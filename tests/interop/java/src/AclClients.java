import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The Java client with AclClientRPCHook. Arguments: mode (produce | consume | sign), accessKey, secretKey, and
 * produce: namesrv, group, topic, count (emits "sent" or "error" per message, then "done");
 * consume: namesrv, group, topic, count, timeoutMs (a push consumer from the first offset; "received" per
 * message, then "done" with the count once count arrived or the timeout passed);
 * sign: code, body, and f.NAME=VALUE request fields (emits "signed" with the Signature the hook computed).
 */
public final class AclClients {
    private AclClients() {
    }

    static RPCHook hook(Map<String, String> args) {
        return new AclClientRPCHook(new SessionCredentials(Out.need(args, "accessKey"), Out.need(args, "secretKey")));
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        switch (Out.need(args, "mode")) {
            case "produce":
                produce(args);
                break;
            case "consume":
                consume(args);
                break;
            case "sign":
                sign(args);
                break;
            default:
                throw new IllegalArgumentException("mode " + args.get("mode"));
        }
    }

    static void produce(Map<String, String> args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(Out.need(args, "group"), hook(args));
        producer.setNamesrvAddr(Out.need(args, "namesrv"));
        producer.setInstanceName("acl-produce-" + ProcessHandle.current().pid());
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(5000);
        producer.start();
        int count = Out.integer(args, "count", 1);
        try {
            for (int i = 0; i < count; i++) {
                Message msg = new Message(Out.need(args, "topic"), ("acl-" + i).getBytes(StandardCharsets.UTF_8));
                try {
                    Out.emit("sent", "index", i, "status", producer.send(msg).getSendStatus().name());
                } catch (Exception e) {
                    Out.error("send " + i, e);
                }
            }
        } finally {
            producer.shutdown();
        }
        Out.emit("done");
    }

    static void consume(Map<String, String> args) throws Exception {
        int count = Out.integer(args, "count", 1);
        CountDownLatch all = new CountDownLatch(count);
        AtomicInteger received = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(Out.need(args, "group"), hook(args),
            new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(Out.need(args, "namesrv"));
        consumer.setInstanceName("acl-consume-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(Out.need(args, "topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                Out.emit("received", "body", new String(msg.getBody(), StandardCharsets.UTF_8));
                received.incrementAndGet();
                all.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            consumer.start();
        } catch (Exception e) {
            Out.error("start", e);
            Out.emit("done", "received", 0);
            return;
        }
        all.await(Out.integer(args, "timeoutMs", 20000), TimeUnit.MILLISECONDS);
        consumer.shutdown();
        Out.emit("done", "received", received.get());
    }

    static void sign(Map<String, String> args) {
        RemotingCommand request = RemotingCommand.createRequestCommand(Out.integer(args, "code", 10), null);
        for (Map.Entry<String, String> entry : args.entrySet()) {
            if (entry.getKey().startsWith("f.")) {
                request.addExtField(entry.getKey().substring(2), entry.getValue());
            }
        }
        if (args.containsKey("body")) {
            request.setBody(args.get("body").getBytes(StandardCharsets.UTF_8));
        }
        hook(args).doBeforeRequest("127.0.0.1:1", request);
        Out.emit("signed", "signature", request.getExtFields().get("Signature"), "fields", request.getExtFields());
    }
}
