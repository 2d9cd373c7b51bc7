import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * A started DefaultMQProducer that sends one message to `topic` (so it knows the broker and heartbeats to it)
 * and then idles until stdin closes (then shutdown): what mqadmin producerConnection lists.
 * Arguments: namesrv, group, topic. Emits "started" (clientId, msgId), "stopped".
 */
public final class ProducerHold {
    private static final int SEND_TIMEOUT_MS = 30_000;

    private ProducerHold() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        DefaultMQProducer producer = new DefaultMQProducer(Out.need(args, "group"));
        producer.setNamesrvAddr(Out.need(args, "namesrv"));
        producer.setInstanceName("hold-" + ProcessHandle.current().pid());
        // The first send also fetches the route; 3 s (the default) is too little on a loaded CI machine.
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        producer.start();
        SendResult sent = producer.send(new Message(Out.need(args, "topic"), "hold".getBytes(StandardCharsets.UTF_8)));
        // heartbeats go to the brokers of known routes: one now, not in up to 30 s
        producer.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        Out.emit("started", "clientId", producer.buildMQClientId(), "msgId", sent.getMsgId());
        while (System.in.read() >= 0) {
            // stdin closed = stop
        }
        producer.shutdown();
        Out.emit("stopped");
    }
}
