package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderPayload names the object of the payload bucket that holds the whole
// event of a message carried by reference.
const HeaderPayload = "Kg-Payload"

// payloadMargin is what InlineMax leaves below the server's max payload for
// headers and protocol overhead.
const payloadMargin = 64 << 10

// payloadTTLMargin keeps an object past the stream's MaxAge, so a message
// still in the stream always finds its payload.
const payloadTTLMargin = time.Hour

// ErrPayloadGone means a message carried by reference names an object the
// payload bucket no longer has: no redelivery can bring it back, so the
// message is dead-lettered.
var ErrPayloadGone = errors.New("event payload is gone")

// PayloadRef is the body of a message whose event is carried by reference.
type PayloadRef struct {
	// Bucket is the object store bucket (<stream>_payloads).
	Bucket string `json:"bucket"`
	// Object is the object's name: the hex SHA-256 of the encoded event.
	Object string `json:"object"`
	// Size is the encoded event's length in bytes.
	Size int `json:"size"`
}

// PayloadBucket returns the name of the object store bucket that holds the
// events too large to travel inline.
func (b *Bus) PayloadBucket() string { return b.cfg.Stream + "_payloads" }

// InlineMax returns the largest encoded event published inline; larger ones
// travel by reference.
func (b *Bus) InlineMax() int { return b.inlineMax }

func (b *Bus) setInlineMax() {
	b.inlineMax = b.cfg.InlineMax
	if b.inlineMax > 0 {
		return
	}
	b.inlineMax = 1<<20 - payloadMargin
	if mp := b.nc.MaxPayload(); mp > 2*payloadMargin {
		b.inlineMax = int(mp) - payloadMargin
	}
}

// payloads opens (and with create, creates) the payload bucket once.
func (b *Bus) payloads(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	b.objMu.Lock()
	defer b.objMu.Unlock()
	if b.obj != nil {
		return b.obj, nil
	}
	var (
		obs jetstream.ObjectStore
		err error
	)
	if create {
		obs, err = b.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      b.PayloadBucket(),
			Description: "kgstream events too large for one message",
			TTL:         b.cfg.MaxAge + payloadTTLMargin,
			Storage:     b.cfg.Storage,
		})
	} else {
		obs, err = b.js.ObjectStore(ctx, b.PayloadBucket())
	}
	if err != nil {
		return nil, err
	}
	b.obj = obs
	return obs, nil
}

// publishRef stores data in the payload bucket under its SHA-256 (a
// republish of the same event stores nothing new) and publishes a small
// reference in its place.
func (b *Bus) publishRef(ctx context.Context, subject, msgID string, data []byte) (*jetstream.PubAck, error) {
	name, ref, err := b.storePayload(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("storing the payload of %s: %w", subject, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = ref
	msg.Header.Set(HeaderPayload, name)
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	return b.js.PublishMsg(ctx, msg)
}

// storePayload puts data in the payload bucket under its SHA-256 unless it
// is there already, and returns the object's name and the reference body.
func (b *Bus) storePayload(ctx context.Context, data []byte) (name string, ref []byte, err error) {
	obs, err := b.payloads(ctx, true)
	if err != nil {
		return "", nil, fmt.Errorf("opening payload bucket %s: %w", b.PayloadBucket(), err)
	}
	sum := sha256.Sum256(data)
	name = hex.EncodeToString(sum[:])
	info, err := obs.GetInfo(ctx, name)
	if err != nil || info.Size != uint64(len(data)) {
		if _, err := obs.PutBytes(ctx, name, data); err != nil {
			return "", nil, err
		}
	}
	ref, err = json.Marshal(PayloadRef{Bucket: b.PayloadBucket(), Object: name, Size: len(data)})
	if err != nil {
		return "", nil, fmt.Errorf("encoding payload reference: %w", err)
	}
	return name, ref, nil
}

// resolvePayload returns the whole event of a message: its data, or the
// object its HeaderPayload names. A missing object (or bucket) is
// ErrPayloadGone.
func (b *Bus) resolvePayload(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	name := h.Get(HeaderPayload)
	if name == "" {
		return data, nil
	}
	obs, err := b.payloads(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("reading payload %s: %w: bucket %s not found", name, ErrPayloadGone, b.PayloadBucket())
	}
	if err != nil {
		return nil, fmt.Errorf("opening payload bucket %s: %w", b.PayloadBucket(), err)
	}
	full, err := obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("reading payload %s: %w", name, ErrPayloadGone)
	}
	if err != nil {
		return nil, fmt.Errorf("reading payload %s: %w", name, err)
	}
	return full, nil
}

// EventData returns the whole event of a stored message, reading the
// payload bucket when the message carries its event by reference (for tools
// and tests that read the stream directly).
func (b *Bus) EventData(ctx context.Context, msg jetstream.Msg) ([]byte, error) {
	return b.resolvePayload(ctx, msg.Headers(), msg.Data())
}

// ByReference reports whether a stored message carries its event by
// reference.
func ByReference(msg jetstream.Msg) bool { return msg.Headers().Get(HeaderPayload) != "" }

// Replay publishes a dead letter's event again on its original subject, so
// its stage handles it once more. An event carried by reference is
// republished as the same reference. The message id is new, so JetStream
// does not take the replay for a duplicate of the original.
func (b *Bus) Replay(ctx context.Context, dl DeadLetter) (*jetstream.PubAck, error) {
	if dl.Subject == "" {
		return nil, errors.New("replaying a dead letter: no subject")
	}
	msg := nats.NewMsg(dl.Subject)
	switch {
	case dl.Data != nil:
		msg.Data = dl.Data
	default:
		msg.Data = []byte(dl.RawData)
	}
	if dl.Payload != "" {
		msg.Header.Set(HeaderPayload, dl.Payload)
	}
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("replay/%s/%d/%d", dl.Stage, dl.Sequence, time.Now().UnixNano()))
	ack, err := b.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("replaying dead letter %d of %s: %w", dl.Sequence, dl.Stage, err)
	}
	return ack, nil
}

// StorePayload keeps data in the payload bucket under its SHA-256 and
// returns the object's name, for a producer that must hold an event too
// large for a key-value record or a message outside the stream (the
// gateway's outbox). Objects expire with the bucket's TTL.
func (b *Bus) StorePayload(ctx context.Context, data []byte) (string, error) {
	name, _, err := b.storePayload(ctx, data)
	return name, err
}

// LoadPayload returns what StorePayload stored under name; a missing object
// is ErrPayloadGone.
func (b *Bus) LoadPayload(ctx context.Context, name string) ([]byte, error) {
	h := nats.Header{}
	h.Set(HeaderPayload, name)
	return b.resolvePayload(ctx, h, nil)
}
