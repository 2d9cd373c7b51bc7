import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The load generator of bench/vs_rocketmq.py: the official RocketMQ 4.9.7 Java client against whichever broker
 * the NameServer names. Arguments key=value; role=load|probe|fill. Prints JSON lines on stdout.
 *
 * role=load: for each send mode in modes (sync, async, batch) on its own topic (queues queues, created on broker):
 * a live push consumer subscribes first (end-to-end latency: its receipt time minus the message's store
 * timestamp), warm messages are sent untimed, then count messages from threads threads, each send timed
 * (sync: one call; async: send to callback, inflight outstanding in all; batch: one call per batchSize
 * messages, every message of the batch gets the call's latency). After the live consumer has everything, a new
 * group drains the topic from its first offset (consume rate: messages / first to last receipt; also reported:
 * when the first receipt came, the longest gap between receipts and when it ended, and each queue's first
 * receipt, all in ms after the drain consumer started: where a slow drain lost its time).
 * role=probe: prints "ready", then sends to topic every 20 ms until one is SEND_OK ("accepted" with t_ms).
 * role=fill: batch sends until count messages are stored (filling a CommitLog for the recovery figure).
 */
public final class Load {
    private static final int BODY_POOL = 256;
    private static final long WAIT_MS = 120_000;

    private Load() {
    }

    static synchronized void emit(String event, Object... keyValues) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            line.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
        }
        line.put("t_ms", System.currentTimeMillis());
        System.out.println(JSON.toJSONString(line));
        System.out.flush();
    }

    static Map<String, String> args(String[] argv) {
        Map<String, String> parsed = new LinkedHashMap<>();
        for (String arg : argv) {
            int eq = arg.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("expected key=value, got " + arg);
            }
            parsed.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        return parsed;
    }

    static String need(Map<String, String> args, String key) {
        String value = args.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing argument " + key + "=...");
        }
        return value;
    }

    static int integer(Map<String, String> args, String key, int fallback) {
        String value = args.get(key);
        return value == null ? fallback : Integer.parseInt(value);
    }

    /** Random bodies, generated once: the client never compresses 1 KB, so content only has to be incompressible. */
    static byte[][] bodies(int size) {
        Random random = new Random(16);
        byte[][] pool = new byte[BODY_POOL][size];
        for (byte[] body : pool) {
            random.nextBytes(body);
        }
        return pool;
    }

    static DefaultMQProducer producer(String namesrv, String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10_000);
        producer.setMaxMessageSize(4 * 1024 * 1024);
        producer.start();
        return producer;
    }

    /** Latencies in nanoseconds, one slot per measured message. */
    static final class Samples {
        final long[] values;
        final AtomicInteger size = new AtomicInteger();

        Samples(int capacity) {
            values = new long[capacity];
        }

        void add(long value) {
            int at = size.getAndIncrement();
            if (at < values.length) {
                values[at] = value;
            }
        }

        double quantileMs(double q) {
            int n = Math.min(size.get(), values.length);
            if (n == 0) {
                return -1;
            }
            long[] sorted = Arrays.copyOf(values, n);
            Arrays.sort(sorted);
            int index = (int) Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
            return sorted[index] / 1e6;
        }
    }

    /** A push consumer counting receipts; `e2e` gets receipt minus store time (ms, as ns for Samples). */
    static final class Counter {
        final DefaultMQPushConsumer consumer;
        final AtomicInteger received = new AtomicInteger();
        final AtomicLong firstMs = new AtomicLong();
        final AtomicLong lastMs = new AtomicLong();
        /** The longest wait between two receipts, and when it ended: a drain's stall, where the rate is lost. */
        final AtomicLong longestGapMs = new AtomicLong();
        final AtomicLong longestGapEndMs = new AtomicLong();
        /** When each queue first delivered (ms after the consumer started), for a queue that started late. */
        final Map<String, Long> queueFirstMs = new java.util.concurrent.ConcurrentHashMap<>();
        final long startedMs = System.currentTimeMillis();
        /** Messages to wait for: lowered by the sends that failed, which no broker acknowledged. */
        final AtomicInteger target = new AtomicInteger();
        final CountDownLatch done;

        Counter(String namesrv, String group, String topic, int expected, Samples e2e) throws Exception {
            done = new CountDownLatch(1);
            target.set(expected);
            consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setConsumeMessageBatchMaxSize(32);
            consumer.setPullBatchSize(32);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                long now = System.currentTimeMillis();
                firstMs.compareAndSet(0, now);
                long previous = lastMs.get();
                if (previous != 0 && now - previous > longestGapMs.get()) {
                    longestGapMs.set(now - previous);
                    longestGapEndMs.set(now - startedMs);
                }
                queueFirstMs.putIfAbsent(context.getMessageQueue().getBrokerName() + "/"
                    + context.getMessageQueue().getQueueId(), now - startedMs);
                for (MessageExt msg : messages) {
                    if (e2e != null) {
                        e2e.add((now - msg.getStoreTimestamp()) * 1_000_000L);
                    }
                }
                lastMs.set(now);
                if (received.addAndGet(messages.size()) >= target.get()) {
                    done.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
        }

        /** Wait for `failed` fewer messages (sends the client saw fail), not for the whole wait. */
        void expectFewer(int failed) {
            if (received.get() >= target.addAndGet(-failed)) {
                done.countDown();
            }
        }

        void awaitQueues(int queues) throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().size() < queues) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("consumer got no queues in " + WAIT_MS + " ms");
                }
                Thread.sleep(20);
            }
        }
    }

    static Message message(String topic, byte[][] pool, int i) {
        return new Message(topic, "bench", pool[i % pool.length]);
    }

    /** Sends `count` messages of `mode` from `threads` threads; returns failures. Latencies into `latency` if set. */
    static int send(DefaultMQProducer producer, String topic, String mode, int count, int threads, int inflight,
                    int batchSize, byte[][] pool, Samples latency) throws Exception {
        AtomicInteger failures = new AtomicInteger();
        AtomicInteger next = new AtomicInteger();
        Semaphore window = new Semaphore(Math.max(1, inflight));
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                try {
                    while (true) {
                        int step = "batch".equals(mode) ? batchSize : 1;
                        int first = next.getAndAdd(step);
                        if (first >= count) {
                            return;
                        }
                        int n = Math.min(step, count - first);
                        if ("async".equals(mode)) {
                            window.acquire();
                            long started = System.nanoTime();
                            producer.send(message(topic, pool, first), new SendCallback() {
                                @Override
                                public void onSuccess(SendResult result) {
                                    if (latency != null) {
                                        latency.add(System.nanoTime() - started);
                                    }
                                    if (result.getSendStatus() != SendStatus.SEND_OK) {
                                        failures.incrementAndGet();
                                    }
                                    window.release();
                                }

                                @Override
                                public void onException(Throwable error) {
                                    failures.incrementAndGet();
                                    window.release();
                                }
                            });
                            continue;
                        }
                        long started = System.nanoTime();
                        SendResult result;
                        try {
                            if ("batch".equals(mode)) {
                                List<Message> batch = new ArrayList<>(n);
                                for (int i = 0; i < n; i++) {
                                    batch.add(message(topic, pool, first + i));
                                }
                                result = producer.send(batch);
                            } else {
                                result = producer.send(message(topic, pool, first));
                            }
                        } catch (Exception error) {
                            failures.addAndGet(n);
                            continue;
                        }
                        long took = System.nanoTime() - started;
                        if (result.getSendStatus() != SendStatus.SEND_OK) {
                            failures.addAndGet(n);
                        }
                        if (latency != null) {
                            for (int i = 0; i < n; i++) {
                                latency.add(took);
                            }
                        }
                    }
                } catch (InterruptedException error) {
                    Thread.currentThread().interrupt();
                } catch (Exception error) {
                    emit("error", "where", "send", "message", String.valueOf(error));
                    failures.incrementAndGet();
                }
            }, "send-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (!window.tryAcquire(Math.max(1, inflight), WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("async sends still outstanding after " + WAIT_MS + " ms");
        }
        return failures.get();
    }

    static void createTopic(Map<String, String> args, String topic, int queues) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(need(args, "namesrv"));
        admin.setInstanceName("bench-admin-" + topic);
        admin.start();
        try {
            TopicConfig config = new TopicConfig(topic, queues, queues, 6);
            admin.createAndUpdateTopicConfig(need(args, "broker"), config);
        } finally {
            admin.shutdown();
        }
    }

    static void load(Map<String, String> args) throws Exception {
        String namesrv = need(args, "namesrv");
        int queues = integer(args, "queues", 8);
        int count = integer(args, "count", 10_000);
        int batchCount = integer(args, "batchCount", count);
        int warm = integer(args, "warm", 1_000);
        int threads = integer(args, "threads", 8);
        int inflight = integer(args, "inflight", 256);
        int batchSize = integer(args, "batchSize", 32);
        byte[][] pool = bodies(integer(args, "bodySize", 1024));
        DefaultMQProducer producer = producer(namesrv, "bench_producer");
        try {
            for (String mode : need(args, "modes").split(",")) {
                String topic = need(args, "topic") + "_" + mode;
                int measured = "batch".equals(mode) ? batchCount : count;
                createTopic(args, topic, queues);
                Samples e2e = new Samples(measured + warm);
                Counter live = new Counter(namesrv, topic + "_live", topic, measured + warm, e2e);
                live.awaitQueues(queues);
                int warmFailures = send(producer, topic, mode, warm, threads, inflight, batchSize, pool, null);
                Samples latency = new Samples(measured);
                emit("phase", "mode", mode, "phase", "produce");
                long started = System.nanoTime();
                int failures = send(producer, topic, mode, measured, threads, inflight, batchSize, pool, latency);
                double produceS = (System.nanoTime() - started) / 1e9;
                emit("phase", "mode", mode, "phase", "produced");
                live.expectFewer(failures + warmFailures);
                boolean liveDone = live.done.await(WAIT_MS, TimeUnit.MILLISECONDS);
                live.consumer.shutdown();
                Counter drain = new Counter(namesrv, topic + "_drain", topic,
                    measured + warm - failures - warmFailures, null);
                boolean drained = drain.done.await(WAIT_MS, TimeUnit.MILLISECONDS);
                drain.consumer.shutdown();
                double drainS = Math.max(1e-3, (drain.lastMs.get() - drain.firstMs.get()) / 1e3);
                emit("result", "mode", mode, "sent", measured, "failures", failures + warmFailures,
                    "produceSeconds", produceS, "produceRate", (measured - failures) / produceS,
                    "sendP50Ms", latency.quantileMs(0.50), "sendP99Ms", latency.quantileMs(0.99),
                    "sendP999Ms", latency.quantileMs(0.999), "e2eP50Ms", e2e.quantileMs(0.50),
                    "e2eP99Ms", e2e.quantileMs(0.99), "liveReceived", live.received.get(), "liveDone", liveDone,
                    "drainReceived", drain.received.get(), "drained", drained,
                    "consumeRate", drain.received.get() / drainS,
                    "drainFirstMs", drain.firstMs.get() - drain.startedMs, "drainLongestGapMs", drain.longestGapMs.get(),
                    "drainLongestGapEndMs", drain.longestGapEndMs.get(), "drainQueueFirstMs", drain.queueFirstMs);
            }
        } finally {
            producer.shutdown();
        }
        emit("done");
    }

    static void probe(Map<String, String> args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("bench_probe");
        producer.setNamesrvAddr(need(args, "namesrv"));
        producer.setSendMsgTimeout(1_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        emit("ready");
        long deadline = System.currentTimeMillis() + WAIT_MS;
        Message msg = new Message(need(args, "topic"), "probe", new byte[1024]);
        int attempts = 0;
        while (System.currentTimeMillis() < deadline) {
            attempts++;
            try {
                if (producer.send(msg).getSendStatus() == SendStatus.SEND_OK) {
                    emit("accepted", "attempts", attempts);
                    producer.shutdown();
                    return;
                }
            } catch (Exception error) {
                // No route yet, connection refused, still recovering: try again.
            }
            Thread.sleep(20);
        }
        producer.shutdown();
        emit("error", "where", "probe", "message", "no send accepted in " + WAIT_MS + " ms");
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = args(argv);
        try {
            switch (need(args, "role")) {
                case "load":
                    load(args);
                    break;
                case "probe":
                    probe(args);
                    break;
                case "fill": {
                    String topic = need(args, "topic");
                    createTopic(args, topic, integer(args, "queues", 8));
                    DefaultMQProducer producer = producer(need(args, "namesrv"), "bench_fill");
                    long started = System.nanoTime();
                    int failures = send(producer, topic, "batch", integer(args, "count", 1_000_000),
                        integer(args, "threads", 4), 0, integer(args, "batchSize", 64),
                        bodies(integer(args, "bodySize", 1024)), null);
                    producer.shutdown();
                    emit("filled", "failures", failures, "seconds", (System.nanoTime() - started) / 1e9);
                    break;
                }
                default:
                    throw new IllegalArgumentException("role must be load, probe or fill");
            }
        } catch (Exception error) {
            emit("error", "where", "main", "message", String.valueOf(error));
            System.exit(1);
        }
        System.exit(0);
    }
}
