import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Request-reply (DefaultMQProducer.request, RocketMQ 4.6+). Arguments: namesrv, topic, role.
 * role=responder (until stdin closes): creates `topic` (4 queues), consumes it with group `group` and answers every
 * request with MessageUtil.createReplyMessage + send; with holdReplies=true each reply waits for a "release" line on
 * stdin (at most HOLD_MAX_S). Emits "started", "allocated", "request", "held", "replied" or "replyFailed" (with the
 * broker's response code).
 * role=requester: `count` requests (mode=sync | async) with `timeoutMs`; with warmUp=true the topic's route and a
 * heartbeat are fetched and sent first (what the first request does inside its timeout); emits "reply" per answer
 * (the request's and the reply's CORRELATION_ID, the reply's body and topic) or "requestFailed" (the exception),
 * then "done".
 */
public final class RequestReply {
    static final long HOLD_MAX_S = 120;

    private RequestReply() {
    }

    static void responder(Map<String, String> args, String namesrv, String topic) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "responder") + "_replies");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("responder-" + ProcessHandle.current().pid());
        producer.setRetryTimesWhenSendFailed(0);  // one reply per request: the test counts stored replies
        producer.start();
        producer.createTopic("TBW102", topic, 4);
        boolean hold = Boolean.parseBoolean(args.getOrDefault("holdReplies", "false"));
        Semaphore released = new Semaphore(0);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.getOrDefault("group", "responder"));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("responder-" + ProcessHandle.current().pid());
        consumer.subscribe(topic, "*");
        consumer.setPollNameServerInterval(1000);
        consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueStrategy() {
            private final AllocateMessageQueueAveragely averagely = new AllocateMessageQueueAveragely();

            @Override
            public List<MessageQueue> allocate(String group, String clientId, List<MessageQueue> all, List<String> clients) {
                List<MessageQueue> mine = averagely.allocate(group, clientId, all, clients);
                if (!mine.isEmpty()) {
                    Out.emit("allocated", "queues", mine.size());
                }
                return mine;
            }

            @Override
            public String getName() {
                return "AVG";
            }
        });
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt request : msgs) {
                String body = new String(request.getBody(), StandardCharsets.UTF_8);
                Out.emit("request", "msgId", request.getMsgId(), "body", body,
                    "correlationId", request.getProperty(MessageConst.PROPERTY_CORRELATION_ID),
                    "replyTo", request.getProperty(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT));
                try {
                    if (hold) {
                        Out.emit("held", "msgId", request.getMsgId());
                        if (!released.tryAcquire(HOLD_MAX_S, TimeUnit.SECONDS)) {
                            Out.emit("holdExpired", "msgId", request.getMsgId());
                        }
                    }
                    Message reply = MessageUtil.createReplyMessage(request,
                        ("reply:" + body).getBytes(StandardCharsets.UTF_8));
                    SendResult result = producer.send(reply, 10000);
                    Out.emit("replied", "status", result.getSendStatus().name(), "msgId", result.getMsgId(),
                        "topic", reply.getTopic(), "correlationId", reply.getProperty(MessageConst.PROPERTY_CORRELATION_ID));
                } catch (Exception e) {
                    // a broker refusal the producer retries (SYSTEM_ERROR) arrives wrapped in MQClientException
                    Throwable cause = e instanceof MQBrokerException ? e : e.getCause();
                    if (cause instanceof MQBrokerException) {
                        MQBrokerException refused = (MQBrokerException) cause;
                        Out.emit("replyFailed", "type", e.getClass().getName(), "causeType", cause.getClass().getName(),
                            "responseCode", refused.getResponseCode(), "errorMessage", refused.getErrorMessage());
                        continue;
                    }
                    Out.emit("replyFailed", "type", e.getClass().getName(), "message", String.valueOf(e.getMessage()));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Out.emit("started");
        BufferedReader input = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = input.readLine(); line != null; line = input.readLine()) {  // until stdin closes
            if ("release".equals(line.trim())) {
                released.release();
            }
        }
        consumer.shutdown();
        producer.shutdown();
        Out.emit("stopped");
    }

    static void replied(Message request, Message reply) {
        Out.emit("reply", "requestCorrelationId", request.getProperty(MessageConst.PROPERTY_CORRELATION_ID),
            "correlationId", reply.getProperty(MessageConst.PROPERTY_CORRELATION_ID),
            "body", new String(reply.getBody(), StandardCharsets.UTF_8), "topic", reply.getTopic(),
            "msgType", reply.getProperty(MessageConst.PROPERTY_MESSAGE_TYPE));
    }

    static void failed(Throwable e) {
        Integer errorCode = null;  // not a conditional expression: its int branch would unbox a null
        if (e instanceof MQClientException) {
            errorCode = ((MQClientException) e).getResponseCode();
        } else if (e instanceof RequestTimeoutException) {
            errorCode = ((RequestTimeoutException) e).getResponseCode();
        }
        Out.emit("requestFailed", "type", e.getClass().getName(), "message", String.valueOf(e.getMessage()),
            "errorCode", errorCode);
    }

    static void requester(Map<String, String> args, String namesrv, String topic) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "requester"));
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("requester-" + ProcessHandle.current().pid());
        producer.start();
        Out.emit("started", "clientId", producer.buildMQClientId());
        if (Boolean.parseBoolean(args.getOrDefault("warmUp", "false"))) {
            // what DefaultMQProducerImpl.prepareSendRequest does for a topic without a route, inside the timeout
            MQClientInstance factory = producer.getDefaultMQProducerImpl().getmQClientFactory();
            factory.updateTopicRouteInfoFromNameServer(topic);
            factory.sendHeartbeatToAllBrokerWithLock();
            Out.emit("warmedUp");
        }
        long timeoutMs = Out.longValue(args, "timeoutMs", 15000);
        int count = Out.integer(args, "count", 1);
        boolean async = "async".equals(args.getOrDefault("mode", "sync"));
        CountDownLatch latch = new CountDownLatch(count);
        List<Message> requests = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message request = new Message(topic, ("request-" + i).getBytes(StandardCharsets.UTF_8));
            requests.add(request);
            try {
                if (async) {
                    producer.request(request, new RequestCallback() {
                        @Override
                        public void onSuccess(Message reply) {
                            replied(request, reply);
                            latch.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            failed(e);
                            latch.countDown();
                        }
                    }, timeoutMs);
                } else {
                    replied(request, producer.request(request, timeoutMs));
                    latch.countDown();
                }
            } catch (Exception e) {
                failed(e);
                latch.countDown();
            }
        }
        latch.await(timeoutMs * count + 10000, TimeUnit.MILLISECONDS);
        producer.shutdown();
        Out.emit("done");
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = Out.args(argv);
        String namesrv = Out.need(args, "namesrv");
        String topic = Out.need(args, "topic");
        if ("responder".equals(Out.need(args, "role"))) {
            responder(args, namesrv, topic);
        } else {
            requester(args, namesrv, topic);
        }
    }
}
