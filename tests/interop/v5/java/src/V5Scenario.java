import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Drive the official RocketMQ 5 Java client (rocketmq-client-java) against a gRPC endpoint, with the
 * same modes and JSON events as tests/interop/python_v5/client/scenario.py, so one test file checks
 * both clients:
 *
 * <pre>
 *   produce ENDPOINT TOPIC COUNT              normal sends (tag, keys, a property; odd ones async), a FIFO and
 *                                             a delayed one
 *   simple ENDPOINT TOPIC GROUP COUNT TAG [S] receive COUNT (at most S seconds), nack the first once (1 s), ack all
 *   push ENDPOINT TOPIC GROUP COUNT           a push consumer failing each message's first delivery
 *   hold ENDPOINT TOPIC GROUP COUNT           receive COUNT, hidden for 15 s, and exit without acking
 *   transaction ENDPOINT TOPIC                commit one, roll back one, leave one to the checker (commits)
 *   fifo ENDPOINT TOPIC GROUP                 two message groups of 3, then a push consumer of a FIFO group
 *                                             that fails fifo-g1-1 once
 * </pre>
 */
public final class V5Scenario {
    private static final int RECEIVE_DEADLINE_S = 60;
    private static final int HOLD_INVISIBLE_S = 15;
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private V5Scenario() {
    }

    public static void main(String[] argv) throws Exception {
        String mode = argv[0];
        String endpoint = argv[1];
        try {
            switch (mode) {
                case "produce":
                    produce(endpoint, argv[2], Integer.parseInt(argv[3]));
                    break;
                case "simple":
                    simple(endpoint, argv[2], argv[3], Integer.parseInt(argv[4]), argv[5],
                        argv.length > 6 ? Double.parseDouble(argv[6]) : RECEIVE_DEADLINE_S);
                    break;
                case "push":
                    push(endpoint, argv[2], argv[3], Integer.parseInt(argv[4]));
                    break;
                case "hold":
                    hold(endpoint, argv[2], argv[3], Integer.parseInt(argv[4]));
                    break;
                case "transaction":
                    transaction(endpoint, argv[2]);
                    break;
                case "fifo":
                    fifo(endpoint, argv[2], argv[3]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Throwable error) {
            emit("error", "error", error.toString());
            error.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    /** SHOAL_V5_ACCESS_KEY / SHOAL_V5_SECRET_KEY, when set, sign every call (plain ACL); SHOAL_V5_TLS=1: TLS. */
    private static ClientConfiguration config(String endpoint) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(endpoint)
            .enableSsl("1".equals(System.getenv("SHOAL_V5_TLS")))
            .setRequestTimeout(Duration.ofSeconds(10));
        String accessKey = System.getenv("SHOAL_V5_ACCESS_KEY");
        if (accessKey != null && !accessKey.isEmpty()) {
            builder.setCredentialProvider(
                new StaticSessionCredentialsProvider(accessKey, System.getenv("SHOAL_V5_SECRET_KEY")));
        }
        return builder.build();
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    private static void produce(String endpoint, String topic, int count) throws Exception {
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(endpoint))
            .setTopics(topic).build()) {
            for (int index = 0; index < count; index++) {
                String body = "normal-" + index;
                Message message = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagA")
                    .setKeys("key-" + index).addProperty("index", String.valueOf(index))
                    .setBody(body.getBytes(StandardCharsets.UTF_8)).build();
                // Odd ones with sendAsync: the producer's asynchronous path, answered the same way.
                SendReceipt sent = index % 2 == 0 ? producer.send(message) : producer.sendAsync(message).get();
                emit("sent", "body", body, "message_id", sent.getMessageId().toString());
            }
            Message fifo = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagA").setMessageGroup("group-1")
                .setBody("fifo-0".getBytes(StandardCharsets.UTF_8)).build();
            emit("sent", "body", "fifo-0", "message_id", producer.send(fifo).getMessageId().toString());
            Message delayed = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagA")
                .setDeliveryTimestamp(System.currentTimeMillis() + 3000)
                .setBody("delayed-0".getBytes(StandardCharsets.UTF_8)).build();
            double at = now();
            SendReceipt receipt = producer.send(delayed);
            emit("sent", "body", "delayed-0", "message_id", receipt.getMessageId().toString(), "at", at);
        }
    }

    private static SimpleConsumer simpleConsumer(String endpoint, String topic, String group, String tag)
        throws Exception {
        return PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config(endpoint)).setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression(tag, FilterExpressionType.TAG)))
            .build();
    }

    private static void simple(String endpoint, String topic, String group, int count, String tag, double seconds)
        throws Exception {
        try (SimpleConsumer consumer = simpleConsumer(endpoint, topic, group, tag)) {
            Set<String> seen = new TreeSet<>();
            boolean nacked = false;
            long deadline = System.currentTimeMillis() + (long) (seconds * 1000);
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                List<MessageView> views = receive(consumer, Duration.ofSeconds(20));
                for (MessageView view : views) {
                    emit("received", describe(view));
                    String body = bodyOf(view);
                    if (!nacked) {
                        nacked = true;
                        consumer.changeInvisibleDuration(view, Duration.ofSeconds(1));
                        emit("nacked", "body", body);
                        continue;
                    }
                    consumer.ack(view);
                    seen.add(body);
                    emit("acked", "body", body);
                }
            }
        }
    }

    /** One receive; "no new message" (the server's MESSAGE_NOT_FOUND) is an empty batch. */
    private static List<MessageView> receive(SimpleConsumer consumer, Duration invisible) throws Exception {
        return receive(consumer, 16, invisible);
    }

    private static List<MessageView> receive(SimpleConsumer consumer, int most, Duration invisible) throws Exception {
        try {
            return consumer.receive(most, invisible);
        } catch (Exception error) {
            if (String.valueOf(error.getMessage()).contains("40401") || error.getClass().getSimpleName().contains("NotFound")) {
                return Collections.emptyList();
            }
            throw error;
        }
    }

    private static void push(String endpoint, String topic, String group, int count) throws Exception {
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        Set<String> succeeded = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(count);
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config(endpoint))
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(view -> {
                String body = bodyOf(view);
                emit("consumed", describe(view));
                if (failedOnce.add(body)) {
                    return ConsumeResult.FAILURE;
                }
                if (succeeded.add(body)) {
                    done.countDown();
                }
                return ConsumeResult.SUCCESS;
            }).build();
        try {
            done.await(RECEIVE_DEADLINE_S, TimeUnit.SECONDS);
            Thread.sleep(1000);
        } finally {
            consumer.close();
        }
        emit("push-done", "succeeded", new ArrayList<>(new TreeSet<>(succeeded)));
    }

    private static void hold(String endpoint, String topic, String group, int count) throws Exception {
        SimpleConsumer consumer = simpleConsumer(endpoint, topic, group, "*");
        int held = 0;
        long deadline = System.currentTimeMillis() + RECEIVE_DEADLINE_S * 1000L;
        while (held < count && System.currentTimeMillis() < deadline) {
            double askedAt = now();
            // At most what is still wanted: a message held past COUNT would be hidden, unreported.
            for (MessageView view : receive(consumer, count - held, Duration.ofSeconds(HOLD_INVISIBLE_S))) {
                held++;
                Map<String, Object> fields = describe(view);
                fields.put("asked_at", askedAt);
                fields.put("invisible_s", HOLD_INVISIBLE_S);
                emit("held", fields);
            }
        }
        emit("exiting", "held", held);
        System.out.flush();
        Runtime.getRuntime().halt(0); // a crash: no ack, no close
    }

    private static void transaction(String endpoint, String topic) throws Exception {
        CountDownLatch checked = new CountDownLatch(1);
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(endpoint))
            .setTopics(topic).setTransactionChecker(view -> {
                emit("checked", "body", bodyOf(view), "topic", view.getTopic(), "message_id",
                    view.getMessageId().toString());
                checked.countDown();
                return TransactionResolution.COMMIT;
            }).build()) {
            String[][] plan = {{"tx-commit", "commit"}, {"tx-rollback", "rollback"}, {"tx-orphan", null}};
            for (String[] step : plan) {
                Message message = PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagA")
                    .setBody(step[0].getBytes(StandardCharsets.UTF_8)).build();
                Transaction transaction = producer.beginTransaction();
                SendReceipt receipt = producer.send(message, transaction);
                emit("sent", "body", step[0], "message_id", receipt.getMessageId().toString());
                if ("commit".equals(step[1])) {
                    transaction.commit();
                } else if ("rollback".equals(step[1])) {
                    transaction.rollback();
                }
                emit("ended", "body", step[0], "how", step[1]);
            }
            checked.await(RECEIVE_DEADLINE_S, TimeUnit.SECONDS);
            Thread.sleep(1000);
        }
    }

    private static final String[] FIFO_BODIES = {
        "fifo-g1-0", "fifo-g2-0", "fifo-g1-1", "fifo-g2-1", "fifo-g1-2", "fifo-g2-2"};

    private static void fifo(String endpoint, String topic, String group) throws Exception {
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config(endpoint))
            .setTopics(topic).build()) {
            for (String body : FIFO_BODIES) {
                Message message = PROVIDER.newMessageBuilder().setTopic(topic).setMessageGroup(body.split("-")[1])
                    .setBody(body.getBytes(StandardCharsets.UTF_8)).build();
                emit("sent", "body", body, "message_id", producer.send(message).getMessageId().toString());
            }
        }
        List<String> succeeded = Collections.synchronizedList(new ArrayList<>());
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(FIFO_BODIES.length);
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config(endpoint))
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(view -> {
                String body = bodyOf(view);
                emit("consumed", describe(view));
                if ("fifo-g1-1".equals(body) && failedOnce.add(body)) {
                    return ConsumeResult.FAILURE;
                }
                succeeded.add(body);
                done.countDown();
                return ConsumeResult.SUCCESS;
            }).build();
        try {
            done.await(RECEIVE_DEADLINE_S, TimeUnit.SECONDS);
            Thread.sleep(1000);
        } finally {
            consumer.close();
        }
        emit("fifo-done", "succeeded", new ArrayList<>(succeeded));
    }

    private static String bodyOf(MessageView view) {
        ByteBuffer buffer = view.getBody().duplicate();
        byte[] bytes = new byte[buffer.remaining()];
        buffer.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static Map<String, Object> describe(MessageView view) {
        Map<String, Object> fields = new java.util.LinkedHashMap<>();
        fields.put("body", bodyOf(view));
        fields.put("tag", view.getTag().orElse(null));
        fields.put("keys", new ArrayList<>(new TreeSet<>(view.getKeys())));
        fields.put("properties", view.getProperties());
        fields.put("attempt", view.getDeliveryAttempt());
        fields.put("message_id", view.getMessageId().toString());
        fields.put("group", view.getMessageGroup().orElse(null));
        fields.put("at", now());
        return fields;
    }

    // --- JSON lines, by hand: the shaded client brings no JSON library of its own to use ---
    private static void emit(String event, Object... keyValues) {
        Map<String, Object> fields = new java.util.LinkedHashMap<>();
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            fields.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
        }
        emit(event, fields);
    }

    private static synchronized void emit(String event, Map<String, Object> fields) {
        StringBuilder line = new StringBuilder("{\"event\": ").append(json(event));
        for (Map.Entry<String, Object> entry : fields.entrySet()) {
            line.append(", ").append(json(entry.getKey())).append(": ").append(json(entry.getValue()));
        }
        System.out.println(line.append('}'));
        System.out.flush();
    }

    private static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof Map) {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                if (out.length() > 1) {
                    out.append(", ");
                }
                out.append(json(String.valueOf(entry.getKey()))).append(": ").append(json(entry.getValue()));
            }
            return out.append('}').toString();
        }
        if (value instanceof List) {
            StringBuilder out = new StringBuilder("[");
            for (Object item : (List<?>) value) {
                if (out.length() > 1) {
                    out.append(", ");
                }
                out.append(json(item));
            }
            return out.append(']').toString();
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
