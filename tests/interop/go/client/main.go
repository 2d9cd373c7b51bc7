// A RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) for tests/interop/go: one JSON line per
// event on stdout, so the tests read what the real client saw. Built by tests/interop/go/conftest.py.
//
//	client produce NAMESRV TOPIC COUNT
//	    COUNT sync sends (tag TagG, key k<i>, property origin=go), then one batch of two, one async,
//	    one oneway and one delayed (level 1) send; an "error" event and exit 1 on the first failure.
//	client consume NAMESRV TOPIC GROUP EXPECT TIMEOUT_S FAIL_BODY [EXPRESSION [orderly]]
//	    a clustering push consumer from the first offset (tag EXPRESSION, default *; "orderly": an
//	    orderly consumer, which locks its queues); the first delivery of FAIL_BODY answers
//	    ConsumeRetryLater (orderly: SuspendCurrentQueueAMoment); stops after EXPECT consumed
//	    (successful) messages or TIMEOUT_S.
//	client produce-ordered NAMESRV TOPIC COUNT KEYS
//	    COUNT sync sends, message i with sharding key order-<i % KEYS> and body o-<key>-<i / KEYS>, through
//	    the hash queue selector (one queue per key); tag TagA for even i, TagB for odd i.
//	client transact NAMESRV TOPIC WAIT_S
//	    a transaction producer sends tx-commit (committed at once), tx-rollback (rolled back) and
//	    tx-unknown (UNKNOW; the broker's check is answered COMMIT), then waits up to WAIT_S for that check
//	    and stays up 3 s more (its answer goes out after CheckLocalTransaction returns).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var outMu sync.Mutex

func emit(event string, fields map[string]interface{}) {
	fields["event"] = event
	line, _ := json.Marshal(fields)
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Println(string(line))
}

func fail(what string, err error) {
	emit("error", map[string]interface{}{"what": what, "error": fmt.Sprint(err)})
	os.Exit(1)
}

func sent(kind string, body string, result *primitive.SendResult) {
	emit("sent", map[string]interface{}{
		"kind": kind, "body": body, "status": int(result.Status), "msgId": result.MsgID,
		"offsetMsgId": result.OffsetMsgID, "queueId": result.MessageQueue.QueueId, "queueOffset": result.QueueOffset,
	})
}

func produce(namesrv, topic string, count int) {
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{namesrv}), producer.WithRetry(2),
		producer.WithGroupName("go_interop_producer"))
	if err != nil {
		fail("new producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start producer", err)
	}
	defer func() { _ = p.Shutdown() }()
	ctx := context.Background()
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("go-%d", i)
		msg := primitive.NewMessage(topic, []byte(body))
		msg.WithTag("TagG")
		msg.WithKeys([]string{fmt.Sprintf("k%d", i)})
		msg.WithProperty("origin", "go")
		result, err := p.SendSync(ctx, msg)
		if err != nil {
			fail("send "+body, err)
		}
		sent("sync", body, result)
	}
	result, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("batch-0")), primitive.NewMessage(topic, []byte("batch-1")))
	if err != nil {
		fail("send batch", err)
	}
	sent("batch", "batch-0,batch-1", result)
	done := make(chan error, 1)
	err = p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, e error) {
		if e == nil {
			sent("async", "async", r)
		}
		done <- e
	}, primitive.NewMessage(topic, []byte("async")))
	if err == nil {
		err = <-done
	}
	if err != nil {
		fail("send async", err)
	}
	if err := p.SendOneWay(ctx, primitive.NewMessage(topic, []byte("oneway"))); err != nil {
		fail("send oneway", err)
	}
	emit("oneway", map[string]interface{}{"body": "oneway"})
	delayed := primitive.NewMessage(topic, []byte("delayed"))
	delayed.WithDelayTimeLevel(1)
	result, err = p.SendSync(ctx, delayed)
	if err != nil {
		fail("send delayed", err)
	}
	sent("delayed", "delayed", result)
	emit("done", map[string]interface{}{})
}

func consume(namesrv, topic, group string, expect int, timeout time.Duration, failBody, expression string, orderly bool) {
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{namesrv}), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumerOrder(orderly))
	if err != nil {
		fail("new consumer", err)
	}
	var mu sync.Mutex
	consumed, failed := 0, false
	err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expression},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				fields := map[string]interface{}{
					"body": string(m.Body), "tags": m.GetTags(), "keys": m.GetKeys(), "origin": m.GetProperty("origin"),
					"reconsumeTimes": m.ReconsumeTimes, "msgId": m.MsgId, "topic": m.Topic,
					"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset,
				}
				if string(m.Body) == failBody && !failed {
					failed = true
					emit("retryLater", fields)
					if orderly {
						return consumer.SuspendCurrentQueueAMoment, nil
					}
					return consumer.ConsumeRetryLater, nil
				}
				emit("received", fields)
			}
			consumed += len(msgs)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("subscribe", err)
	}
	if err := c.Start(); err != nil {
		fail("start consumer", err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		mu.Lock()
		enough := consumed >= expect
		mu.Unlock()
		if enough {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.Shutdown()
	mu.Lock()
	emit("done", map[string]interface{}{"consumed": consumed})
	mu.Unlock()
}

func produceOrdered(namesrv, topic string, count, keys int) {
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{namesrv}), producer.WithRetry(2),
		producer.WithGroupName("go_interop_ordered"), producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		fail("new producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start producer", err)
	}
	defer func() { _ = p.Shutdown() }()
	for i := 0; i < count; i++ {
		key := fmt.Sprintf("order-%d", i%keys)
		body := fmt.Sprintf("o-%s-%d", key, i/keys)
		msg := primitive.NewMessage(topic, []byte(body))
		msg.WithShardingKey(key)
		if i%2 == 0 {
			msg.WithTag("TagA")
		} else {
			msg.WithTag("TagB")
		}
		result, err := p.SendSync(context.Background(), msg)
		if err != nil {
			fail("send "+body, err)
		}
		sent("ordered", body, result)
	}
	emit("done", map[string]interface{}{})
}

// checkGrace is how long the transaction producer stays up after the broker's first check.
const checkGrace = 3 * time.Second

// txListener answers by body: tx-commit and tx-rollback at once, tx-unknown UNKNOW and then COMMIT when checked.
type txListener struct {
	checked chan string
}

func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	switch string(msg.Body) {
	case "tx-commit":
		return primitive.CommitMessageState
	case "tx-rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	emit("checked", map[string]interface{}{"body": string(msg.Body), "msgId": msg.MsgId,
		"transactionId": msg.TransactionId})
	select {
	case l.checked <- string(msg.Body):
	default:
	}
	return primitive.CommitMessageState
}

func transact(namesrv, topic string, wait time.Duration) {
	listener := &txListener{checked: make(chan string, 8)}
	p, err := rocketmq.NewTransactionProducer(listener, producer.WithNameServer([]string{namesrv}),
		producer.WithRetry(2), producer.WithGroupName("go_interop_tx"))
	if err != nil {
		fail("new transaction producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start transaction producer", err)
	}
	defer func() { _ = p.Shutdown() }()
	for _, body := range []string{"tx-commit", "tx-rollback", "tx-unknown"} {
		result, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			fail("send "+body, err)
		}
		emit("sent", map[string]interface{}{"kind": "transaction", "body": body, "status": int(result.Status),
			"msgId": result.MsgID, "state": int(result.State), "transactionId": result.TransactionID})
	}
	select {
	case <-listener.checked:
		// The client sends END_TRANSACTION after CheckLocalTransaction returns: stay up for it, and to
		// answer the broker's next check (every transactionCheckInterval) if that one was lost.
		time.Sleep(checkGrace)
	case <-time.After(wait):
	}
	emit("done", map[string]interface{}{})
}

func number(text string) int {
	value, err := strconv.Atoi(text)
	if err != nil {
		fail("argument "+text, err)
	}
	return value
}

func main() {
	rlog.SetLogLevel("error")
	if len(os.Args) < 2 {
		fail("usage", fmt.Errorf("client produce|consume ..."))
	}
	switch os.Args[1] {
	case "produce":
		produce(os.Args[2], os.Args[3], number(os.Args[4]))
	case "consume":
		expression, orderly := "*", false
		if len(os.Args) > 8 {
			expression = os.Args[8]
		}
		if len(os.Args) > 9 {
			orderly = os.Args[9] == "orderly"
		}
		consume(os.Args[2], os.Args[3], os.Args[4], number(os.Args[5]),
			time.Duration(number(os.Args[6]))*time.Second, os.Args[7], expression, orderly)
	case "produce-ordered":
		produceOrdered(os.Args[2], os.Args[3], number(os.Args[4]), number(os.Args[5]))
	case "transact":
		transact(os.Args[2], os.Args[3], time.Duration(number(os.Args[4]))*time.Second)
	default:
		fail("usage", fmt.Errorf("unknown command %q", os.Args[1]))
	}
}
