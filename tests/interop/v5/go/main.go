// Drive the official RocketMQ 5 Go client (github.com/apache/rocketmq-clients/golang/v5) against a
// gRPC endpoint, with the same modes and JSON events as ../python/scenario.py and
// ../java/src/V5Scenario.java, so one test file checks every client:
//
//	produce ENDPOINT TOPIC COUNT               normal sends (tag, keys, a property; odd ones async), a FIFO and a delayed one
//	simple ENDPOINT TOPIC GROUP COUNT TAG [S]  receive COUNT (at most S seconds), nack the first once (1 s), ack all
//	push ENDPOINT TOPIC GROUP COUNT            a push consumer failing each message's first delivery
//	hold ENDPOINT TOPIC GROUP COUNT            receive COUNT, hidden for 15 s, and exit without acking
//	transaction ENDPOINT TOPIC                 commit one, roll back one, leave one to the checker (commits)
//	fifo ENDPOINT TOPIC GROUP                  two message groups of 3, then a push consumer of a FIFO group
//	                                           that fails fifo-g1-1 once
//
// One JSON line per event on stdout ({"event": ...}); the client's own log goes to stdout too (it
// has no other console), in lines the tests skip. SHOAL_V5_TLS=1 connects over TLS (the client
// verifies no certificate); SHOAL_V5_ACCESS_KEY / SHOAL_V5_SECRET_KEY sign every call.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

const (
	receiveDeadline = 60 * time.Second
	holdInvisible   = 15 * time.Second
	awaitDuration   = 5 * time.Second
	callTimeout     = 30 * time.Second
)

var emitLock sync.Mutex

// emit prints one event as a whole line (listeners run on several goroutines).
func emit(event string, fields map[string]any) {
	line := map[string]any{"event": event}
	for key, value := range fields {
		line[key] = value
	}
	encoded, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	emitLock.Lock()
	defer emitLock.Unlock()
	os.Stdout.Write(append(encoded, '\n'))
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func config(endpoint, group string) *rmq.Config {
	return &rmq.Config{
		Endpoint:      endpoint,
		ConsumerGroup: group,
		Credentials: &credentials.SessionCredentials{
			AccessKey:    os.Getenv("SHOAL_V5_ACCESS_KEY"),
			AccessSecret: os.Getenv("SHOAL_V5_SECRET_KEY"),
		},
	}
}

func describe(message *rmq.MessageView) map[string]any {
	tag, group := "", ""
	if message.GetTag() != nil {
		tag = *message.GetTag()
	}
	if message.GetMessageGroup() != nil {
		group = *message.GetMessageGroup()
	}
	keys := append([]string{}, message.GetKeys()...)
	sort.Strings(keys)
	properties := message.GetProperties()
	if properties == nil {
		properties = map[string]string{}
	}
	fields := map[string]any{
		"body":       string(message.GetBody()),
		"tag":        tag,
		"keys":       keys,
		"properties": properties,
		"attempt":    message.GetDeliveryAttempt(),
		"message_id": message.GetMessageId(),
		"at":         now(),
	}
	if group != "" {
		fields["group"] = group
	}
	return fields
}

func with(fields map[string]any, key string, value any) map[string]any {
	fields[key] = value
	return fields
}

func startProducer(endpoint, topic string, options ...rmq.ProducerOption) rmq.Producer {
	producer, err := rmq.NewProducer(config(endpoint, ""), append(options, rmq.WithTopics(topic))...)
	check(err)
	check(producer.Start())
	return producer
}

func sendOne(producer rmq.Producer, message *rmq.Message) string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	receipts, err := producer.Send(ctx, message)
	check(err)
	return receipts[0].MessageID
}

func produce(endpoint, topic string, count int) {
	producer := startProducer(endpoint, topic)
	defer producer.GracefulStop()
	for index := 0; index < count; index++ {
		body := fmt.Sprintf("normal-%d", index)
		message := &rmq.Message{Topic: topic, Body: []byte(body)}
		message.SetTag("TagA")
		message.SetKeys(fmt.Sprintf("key-%d", index))
		message.AddProperty("index", strconv.Itoa(index))
		var id string
		if index%2 == 1 {
			done := make(chan string, 1)
			producer.SendAsync(context.Background(), message, func(_ context.Context, receipts []*rmq.SendReceipt, err error) {
				check(err)
				done <- receipts[0].MessageID
			})
			id = <-done
		} else {
			id = sendOne(producer, message)
		}
		emit("sent", map[string]any{"body": body, "message_id": id})
	}
	fifo := &rmq.Message{Topic: topic, Body: []byte("fifo-0")}
	fifo.SetTag("TagA")
	fifo.SetMessageGroup("group-1")
	emit("sent", map[string]any{"body": "fifo-0", "message_id": sendOne(producer, fifo)})
	delayed := &rmq.Message{Topic: topic, Body: []byte("delayed-0")}
	delayed.SetTag("TagA")
	delayed.SetDelayTimestamp(time.Now().Add(3 * time.Second))
	emit("sent", map[string]any{"body": "delayed-0", "message_id": sendOne(producer, delayed), "at": now()})
}

func startSimple(endpoint, topic, group, tag string) rmq.SimpleConsumer {
	consumer, err := rmq.NewSimpleConsumer(config(endpoint, group),
		rmq.WithSimpleAwaitDuration(awaitDuration),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.NewFilterExpression(tag)}),
	)
	check(err)
	check(consumer.Start())
	return consumer
}

// noMessage: the client reports an empty long poll (MESSAGE_NOT_FOUND) as an error.
func noMessage(err error) bool {
	return err != nil && strings.Contains(strings.ToUpper(err.Error()), "MESSAGE_NOT_FOUND")
}

func simple(endpoint, topic, group string, count int, tag string, seconds float64) {
	consumer := startSimple(endpoint, topic, group, tag)
	defer consumer.GracefulStop()
	seen := map[string]bool{}
	nacked := false
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for len(seen) < count && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		messages, err := consumer.Receive(ctx, 16, 20*time.Second)
		cancel()
		if noMessage(err) {
			continue
		}
		check(err)
		for _, message := range messages {
			body := string(message.GetBody())
			emit("received", describe(message))
			if !nacked {
				nacked = true
				check(consumer.ChangeInvisibleDuration(message, time.Second))
				emit("nacked", map[string]any{"body": body})
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			check(consumer.Ack(ctx, message))
			cancel()
			seen[body] = true
			emit("acked", map[string]any{"body": body})
		}
	}
}

func startPush(endpoint, topic, group string, consume func(*rmq.MessageView) rmq.ConsumerResult) rmq.PushConsumer {
	consumer, err := rmq.NewPushConsumer(config(endpoint, group),
		rmq.WithPushAwaitDuration(awaitDuration),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: consume}),
	)
	check(err)
	check(consumer.Start())
	return consumer
}

func push(endpoint, topic, group string, count int) {
	var lock sync.Mutex
	failedOnce := map[string]bool{}
	succeeded := map[string]bool{}
	done := make(chan struct{})
	consumer := startPush(endpoint, topic, group, func(message *rmq.MessageView) rmq.ConsumerResult {
		body := string(message.GetBody())
		emit("consumed", describe(message))
		lock.Lock()
		defer lock.Unlock()
		if !failedOnce[body] {
			failedOnce[body] = true
			return rmq.FAILURE
		}
		succeeded[body] = true
		if len(succeeded) == count {
			close(done)
		}
		return rmq.SUCCESS
	})
	select {
	case <-done:
	case <-time.After(receiveDeadline):
	}
	time.Sleep(time.Second) // the last acks leave the client
	check(consumer.GracefulStop())
	lock.Lock()
	bodies := make([]string, 0, len(succeeded))
	for body := range succeeded {
		bodies = append(bodies, body)
	}
	lock.Unlock()
	sort.Strings(bodies)
	emit("push-done", map[string]any{"succeeded": bodies})
}

func hold(endpoint, topic, group string, count int) {
	consumer := startSimple(endpoint, topic, group, "*")
	held := 0
	deadline := time.Now().Add(receiveDeadline)
	for held < count && time.Now().Before(deadline) {
		askedAt := now() // the leases start after this
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		messages, err := consumer.Receive(ctx, int32(count-held), holdInvisible) // at most what is still wanted
		cancel()
		if noMessage(err) {
			continue
		}
		check(err)
		for _, message := range messages {
			held++
			fields := describe(message)
			fields["asked_at"] = askedAt
			fields["invisible_s"] = holdInvisible.Seconds()
			emit("held", fields)
		}
	}
	emit("exiting", map[string]any{"held": held})
	os.Exit(0) // a crash: no ack, no shutdown
}

func transaction(endpoint, topic string) {
	checked := make(chan struct{})
	var once sync.Once
	producer := startProducer(endpoint, topic, rmq.WithTransactionChecker(&rmq.TransactionChecker{
		Check: func(message *rmq.MessageView) rmq.TransactionResolution {
			emit("checked", map[string]any{
				"body": string(message.GetBody()), "topic": message.GetTopic(), "message_id": message.GetMessageId(),
			})
			once.Do(func() { close(checked) })
			return rmq.COMMIT
		},
	}))
	defer producer.GracefulStop()
	for _, end := range [][2]string{{"tx-commit", "commit"}, {"tx-rollback", "rollback"}, {"tx-orphan", ""}} {
		body, how := end[0], end[1]
		message := &rmq.Message{Topic: topic, Body: []byte(body)}
		message.SetTag("TagA")
		tx := producer.BeginTransaction()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		receipts, err := producer.SendWithTransaction(ctx, message, tx)
		cancel()
		check(err)
		emit("sent", map[string]any{"body": body, "message_id": receipts[0].MessageID})
		var ended any
		switch how {
		case "commit":
			check(tx.Commit())
			ended = how
		case "rollback":
			check(tx.RollBack())
			ended = how
		}
		emit("ended", map[string]any{"body": body, "how": ended})
	}
	select {
	case <-checked:
	case <-time.After(receiveDeadline):
	}
	time.Sleep(time.Second) // the checker's EndTransaction leaves the client
}

var fifoBodies = []string{"fifo-g1-0", "fifo-g2-0", "fifo-g1-1", "fifo-g2-1", "fifo-g1-2", "fifo-g2-2"}

func fifo(endpoint, topic, group string) {
	producer := startProducer(endpoint, topic)
	for _, body := range fifoBodies {
		message := &rmq.Message{Topic: topic, Body: []byte(body)}
		message.SetMessageGroup(strings.Split(body, "-")[1])
		emit("sent", map[string]any{"body": body, "message_id": sendOne(producer, message)})
	}
	check(producer.GracefulStop())
	var lock sync.Mutex
	succeeded := []string{}
	failedOnce := false
	done := make(chan struct{})
	consumer := startPush(endpoint, topic, group, func(message *rmq.MessageView) rmq.ConsumerResult {
		body := string(message.GetBody())
		emit("consumed", describe(message))
		lock.Lock()
		defer lock.Unlock()
		if body == "fifo-g1-1" && !failedOnce {
			failedOnce = true
			return rmq.FAILURE
		}
		succeeded = append(succeeded, body)
		if len(succeeded) == len(fifoBodies) {
			close(done)
		}
		return rmq.SUCCESS
	})
	select {
	case <-done:
	case <-time.After(receiveDeadline):
	}
	time.Sleep(time.Second)
	check(consumer.GracefulStop())
	lock.Lock()
	defer lock.Unlock()
	emit("fifo-done", map[string]any{"succeeded": succeeded})
}

// check ends the run on an error: an "error" event, exit status 1.
func check(err error) {
	if err != nil {
		emit("error", map[string]any{"error": err.Error()})
		os.Exit(1)
	}
}

func atoi(text string) int {
	value, err := strconv.Atoi(text)
	check(err)
	return value
}

func main() {
	// The client logs to $user.home/logs/rocketmqlogs unless told otherwise; stdout is always writable.
	os.Setenv("mq.consoleAppender.enabled", "true")
	rmq.ResetLogger()
	rmq.EnableSsl = os.Getenv("SHOAL_V5_TLS") == "1"
	args := os.Args[1:]
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: scenario MODE ENDPOINT TOPIC ... (see the top of main.go)")
		os.Exit(2)
	}
	mode, endpoint, rest := args[0], args[1], args[2:]
	switch mode {
	case "produce":
		produce(endpoint, rest[0], atoi(rest[1]))
	case "simple":
		seconds := receiveDeadline.Seconds()
		if len(rest) > 4 {
			parsed, err := strconv.ParseFloat(rest[4], 64)
			check(err)
			seconds = parsed
		}
		simple(endpoint, rest[0], rest[1], atoi(rest[2]), rest[3], seconds)
	case "push":
		push(endpoint, rest[0], rest[1], atoi(rest[2]))
	case "hold":
		hold(endpoint, rest[0], rest[1], atoi(rest[2]))
	case "transaction":
		transaction(endpoint, rest[0])
	case "fifo":
		fifo(endpoint, rest[0], rest[1])
	default:
		check(fmt.Errorf("unknown mode %s", mode))
	}
}
