import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RemotingClient;

/**
 * A producer that sends `count` sync messages to `topic` and then stays connected until stdin closes, so the
 * test can see its connections. Run with -Dcom.rocketmq.sendMessageWithVIPChannel=true to use the VIP channel.
 * Arguments: namesrv, topic, count, group. Emits "started" (vipChannelEnabled), one "sent" per message,
 * "channels" (the addresses the client's remoting client holds connections to), "stopped".
 */
public final class VipChannel {
    private VipChannel() {
    }

    /** The addresses of NettyRemotingClient.channelTables (private: read by reflection). */
    static List<String> channels(MQClientInstance factory) throws Exception {
        RemotingClient client = factory.getMQClientAPIImpl().getRemotingClient();
        Field field = client.getClass().getDeclaredField("channelTables");
        field.setAccessible(true);
        return new ArrayList<>(new TreeSet<>(((Map<String, ?>) field.get(client)).keySet()));
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String topic = Out.need(args, "topic");
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "vip_producer"));
        producer.setNamesrvAddr(Out.need(args, "namesrv"));
        producer.setInstanceName("vip-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(10000);
        producer.start();
        Out.emit("started", "vipChannelEnabled", producer.isVipChannelEnabled());
        for (int i = 0; i < Out.integer(args, "count", 1); i++) {
            try {
                SendResult result = producer.send(new Message(topic, ("vip-" + i).getBytes(StandardCharsets.UTF_8)));
                Out.emit("sent", "index", i, "status", result.getSendStatus().name(), "msgId", result.getMsgId(),
                    "queueId", result.getMessageQueue().getQueueId());
            } catch (Exception e) {
                Out.error("send " + i, e);
            }
        }
        Out.emit("channels", "addresses", channels(producer.getDefaultMQProducerImpl().getmQClientFactory()));
        while (System.in.read() >= 0) {
            // until stdin closes
        }
        producer.shutdown();
        Out.emit("stopped");
    }
}
