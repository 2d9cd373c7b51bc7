import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;

/**
 * RocketMQ 4.9.7's own SQL92 filter as an oracle for tests/broker/filter/test_sql92.py.
 *
 * stdin (UTF-8, every string hex-encoded UTF-8): a line with the number of property maps, one line
 * per map ("key:value" pairs separated by spaces, "-" for an empty map), then one expression per line.
 * stdout: per expression "E" (does not compile) or one letter per map: T, F, N (null), X (throws).
 */
public class Sql92Oracle {
    static String decode(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int count = Integer.parseInt(in.readLine().trim());
        List<Map<String, String>> maps = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Map<String, String> map = new HashMap<>();
            for (String pair : in.readLine().trim().split(" ")) {
                if (pair.equals("-")) {
                    continue;
                }
                String[] parts = pair.split(":", -1);
                map.put(decode(parts[0]), decode(parts[1]));
            }
            maps.add(map);
        }
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            Expression expression;
            try {
                expression = FilterFactory.INSTANCE.get("SQL92").compile(decode(line.trim()));
            } catch (Throwable error) {
                out.append("E\n");
                continue;
            }
            for (final Map<String, String> map : maps) {
                EvaluationContext context = new EvaluationContext() {
                    public Object get(String name) {
                        return map.get(name);
                    }

                    public Map<String, Object> keyValues() {
                        return new HashMap<String, Object>(map);
                    }
                };
                Object result;
                try {
                    result = expression.evaluate(context);
                } catch (Throwable error) {
                    out.append('X');
                    continue;
                }
                out.append(result == null ? 'N' : Boolean.TRUE.equals(result) ? 'T' : Boolean.FALSE.equals(result) ? 'F' : '?');
            }
            out.append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
