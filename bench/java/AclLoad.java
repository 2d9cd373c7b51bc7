import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * The Java load of bench/acl.py --client java: the official RocketMQ 4.9.7 client against two clusters, one
 * producer each ("off": no credentials; "on": AclClientRPCHook with accessKey/secretKey, unless control=true).
 * Arguments key=value: namesrvOff, namesrvOn, topic, threads, bodyBytes, accessKey, secretKey, control.
 * Then one command per stdin line, "<off|on> <window ms>": threads threads send synchronously, one message per
 * call, to that cluster for the window; prints {"event":"window","mode":...,"sent":N,"ms":elapsed}.
 * "quit" (or the end of stdin) stops. Prints {"event":"ready"} once both producers have started.
 */
public final class AclLoad {
    private AclLoad() {
    }

    static void emit(Object... keyValues) {
        Map<String, Object> line = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            line.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
        }
        System.out.println(JSON.toJSONString(line));
        System.out.flush();
    }

    static DefaultMQProducer producer(String group, String namesrv, SessionCredentials credentials) throws Exception {
        DefaultMQProducer producer = credentials == null
            ? new DefaultMQProducer(group)
            : new DefaultMQProducer(group, new AclClientRPCHook(credentials));
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group);
        producer.setSendMsgTimeout(10_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        return producer;
    }

    static long window(DefaultMQProducer producer, String topic, byte[] body, int threads, long windowMs)
        throws InterruptedException {
        AtomicLong sent = new AtomicLong();
        long stopAt = System.nanoTime() + windowMs * 1_000_000L;
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Thread(() -> {
                while (System.nanoTime() < stopAt) {
                    try {
                        SendResult result = producer.send(new Message(topic, body));
                        if (result.getSendStatus() != SendStatus.SEND_OK) {
                            emit("event", "error", "status", String.valueOf(result.getSendStatus()));
                            return;
                        }
                        sent.incrementAndGet();
                    } catch (Exception error) {
                        emit("event", "error", "error", String.valueOf(error));
                        return;
                    }
                }
            });
            workers[i].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        return sent.get();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new LinkedHashMap<>();
        for (String arg : argv) {
            int eq = arg.indexOf('=');
            args.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        String topic = args.get("topic");
        int threads = Integer.parseInt(args.get("threads"));
        byte[] body = new byte[Integer.parseInt(args.get("bodyBytes"))];
        new Random(17).nextBytes(body);
        boolean control = Boolean.parseBoolean(args.getOrDefault("control", "false"));
        SessionCredentials credentials = control ? null : new SessionCredentials(args.get("accessKey"), args.get("secretKey"));
        Map<String, DefaultMQProducer> producers = new LinkedHashMap<>();
        producers.put("off", producer("AclBenchJavaOff", args.get("namesrvOff"), null));
        producers.put("on", producer("AclBenchJavaOn", args.get("namesrvOn"), credentials));
        emit("event", "ready");
        BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = input.readLine(); line != null && !line.trim().equals("quit"); line = input.readLine()) {
            String[] words = line.trim().split("\\s+");
            long started = System.nanoTime();
            long sent = window(producers.get(words[0]), topic, body, threads, Long.parseLong(words[1]));
            emit("event", "window", "mode", words[0], "sent", sent, "ms", (System.nanoTime() - started) / 1e6);
        }
        for (DefaultMQProducer producer : producers.values()) {
            producer.shutdown();
        }
        System.exit(0);
    }
}
