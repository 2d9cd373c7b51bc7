import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The v5 send/receive load of bench/v5_vs_rocketmq5.py, on the official RocketMQ 5 Java client
 * (rocketmq-client-java) against any gRPC endpoint:
 *
 * <pre>
 *   V5Load ENDPOINT TOPIC GROUP COUNT WARM BODY INFLIGHT
 * </pre>
 *
 * WARM untimed async sends, then COUNT timed async sends of BODY random bytes with at most INFLIGHT
 * outstanding; then a SimpleConsumer of GROUP receives (batches of 32, long polling) and acks
 * (asynchronously, at most INFLIGHT outstanding) until it has acked WARM + COUNT messages, timed. Prints one JSON line:
 * {"sendPerS":..,"sendP50Us":..,"sendP99Us":..,"receivePerS":..,"sent":..,"acked":..}.
 */
public final class V5Load {
    private static final int RECEIVE_BATCH = 32;
    private static final Duration INVISIBLE = Duration.ofSeconds(60);
    private static final Duration AWAIT = Duration.ofSeconds(5);
    private static final long RECEIVE_DEADLINE_MS = 300_000;

    private V5Load() {
    }

    public static void main(String[] argv) throws Exception {
        String endpoint = argv[0];
        String topic = argv[1];
        String group = argv[2];
        int count = Integer.parseInt(argv[3]);
        int warm = Integer.parseInt(argv[4]);
        int bodySize = Integer.parseInt(argv[5]);
        int inflight = Integer.parseInt(argv[6]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(30)).build();
        byte[] body = new byte[bodySize];
        new Random(7).nextBytes(body);
        long[] latencies = new long[count];
        long sendNanos;
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            send(provider, producer, topic, body, warm, inflight, null);
            long started = System.nanoTime();
            send(provider, producer, topic, body, count, inflight, latencies);
            sendNanos = System.nanoTime() - started;
        }
        long receiveNanos;
        long acked;
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(AWAIT)
            .setSubscriptionExpressions(java.util.Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build()) {
            AtomicLong ackedCount = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Semaphore ackWindow = new Semaphore(inflight);
            List<CompletableFuture<Void>> acks = new ArrayList<>();
            long started = System.nanoTime();
            long deadline = System.currentTimeMillis() + RECEIVE_DEADLINE_MS;
            long received = 0;
            while (received < warm + count && System.currentTimeMillis() < deadline) {
                List<MessageView> views = consumer.receive(RECEIVE_BATCH, INVISIBLE);
                for (MessageView view : views) {
                    received++;
                    ackWindow.acquire();  // at most INFLIGHT acks outstanding, as sends
                    acks.add(consumer.ackAsync(view).whenComplete((ok, error) -> {
                        if (error != null) {
                            failure.compareAndSet(null, error);
                        } else {
                            ackedCount.incrementAndGet();
                        }
                        ackWindow.release();
                    }));
                }
            }
            CompletableFuture.allOf(acks.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
            receiveNanos = System.nanoTime() - started;
            if (failure.get() != null) {
                throw new IllegalStateException("an ack failed", failure.get());
            }
            acked = ackedCount.get();
        }
        java.util.Arrays.sort(latencies);
        System.out.println(String.format(java.util.Locale.ROOT,
            "{\"sendPerS\":%.1f,\"sendP50Us\":%d,\"sendP99Us\":%d,\"receivePerS\":%.1f,\"sent\":%d,\"acked\":%d}",
            count / (sendNanos / 1e9), latencies[count / 2] / 1000, latencies[(int) (count * 0.99)] / 1000,
            (warm + count) / (receiveNanos / 1e9), warm + count, acked));
        System.exit(0);
    }

    private static void send(ClientServiceProvider provider, Producer producer, String topic, byte[] body, int count,
        int inflight, long[] latencies) throws Exception {
        Semaphore window = new Semaphore(inflight);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        for (int i = 0; i < count; i++) {
            window.acquire();
            if (failure.get() != null) {
                break;
            }
            Message message = provider.newMessageBuilder().setTopic(topic).setTag("bench")
                .setBody(body).build();
            long started = System.nanoTime();
            final int index = i;
            producer.sendAsync(message).whenComplete((receipt, error) -> {
                if (error != null) {
                    failure.compareAndSet(null, error);
                } else if (latencies != null) {
                    latencies[index] = System.nanoTime() - started;
                }
                window.release();
            });
        }
        window.acquire(inflight);
        window.release(inflight);
        if (failure.get() != null) {
            throw new IllegalStateException("a send failed", failure.get());
        }
    }
}
