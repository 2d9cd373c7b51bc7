import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/** JSON lines on stdout for the pytest side (tests/interop/java/conftest.py), and argument parsing. */
final class Out {
    private Out() {
    }

    /**
     * The clients' request timeout for starting (mqClientApiTimeout, 3 s by default): a cold JVM on a busy CI
     * machine once spent half of it connecting to the NameServer and timed its first route request out.
     */
    static final int CLIENT_API_TIMEOUT_MS = 15_000;

    /** Print one JSON object: {"event": event, key1: value1, ...}. */
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

    static void error(String where, Throwable error) {
        emit("error", "where", where, "type", error.getClass().getName(), "message", String.valueOf(error.getMessage()),
            "cause", error.getCause() == null ? null : error.getCause().getClass().getName() + ": " + error.getCause().getMessage());
    }

    /** key=value arguments into a map. */
    static Map<String, String> args(String[] argv) {
        Map<String, String> parsed = new HashMap<>();
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

    static long longValue(Map<String, String> args, String key, long fallback) {
        String value = args.get(key);
        return value == null ? fallback : Long.parseLong(value);
    }

    static String sha256(byte[] body) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(body);
            StringBuilder hex = new StringBuilder();
            for (byte b : digest) {
                hex.append(String.format("%02x", b));
            }
            return hex.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** Deterministic body of `size` bytes; compressible when `compressible`. */
    static byte[] body(int size, boolean compressible, long seed) {
        byte[] body = new byte[size];
        if (compressible) {
            byte[] text = ("shoal interop body " + seed + " ").getBytes(StandardCharsets.UTF_8);
            for (int i = 0; i < size; i++) {
                body[i] = text[i % text.length];
            }
        } else {
            new java.util.Random(seed).nextBytes(body);
        }
        return body;
    }

    /** The fields of a received message the tests look at. */
    static Object[] describe(MessageExt msg) {
        byte[] body = msg.getBody();
        String text = body.length <= 256 ? new String(body, StandardCharsets.UTF_8) : null;
        return new Object[] {
            "topic", msg.getTopic(), "msgId", msg.getMsgId(), "offsetMsgId", msg instanceof MessageClientExt ? ((MessageClientExt) msg).getOffsetMsgId() : null,
            "queueId", msg.getQueueId(), "queueOffset", msg.getQueueOffset(), "tags", msg.getTags(),
            "keys", msg.getKeys(), "body", text, "bodyLength", body.length, "bodySha256", sha256(body),
            "reconsumeTimes", msg.getReconsumeTimes(), "bornTimestamp", msg.getBornTimestamp(),
            "storeTimestamp", msg.getStoreTimestamp(), "properties", msg.getProperties(),
            "sysFlag", msg.getSysFlag(), "storeHost", String.valueOf(msg.getStoreHost()),
        };
    }

    static Object[] concat(Object[] first, Object... rest) {
        Object[] joined = new Object[first.length + rest.length];
        System.arraycopy(first, 0, joined, 0, first.length);
        System.arraycopy(rest, 0, joined, first.length, rest.length);
        return joined;
    }
}
