package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	outbox "github.com/go-outbox/outbox/core"
)

// ErrSignature is wrapped by the error of Verify for a message without a
// valid signature: none, a malformed one, or one no key gives (the
// message was forged, or changed on the way, or signed with a key the
// consumer does not have).
var ErrSignature = errors.New("relay: message signature missing or wrong")

// MinKeyLen is the shortest signing key Sign and Verify's callers accept,
// in bytes (a sink's SigningKey, the inbox's VerifyKeys).
const MinKeyLen = 32

// signaturePrefix names the signature's version in HeaderSignature.
const signaturePrefix = "v1="

// signed lists the headers a signature binds, in the order they are
// digested; the payload comes last.
var signed = [...]string{HeaderEventID, HeaderEventType, HeaderAggregateType, HeaderAggregateID,
	HeaderTenantID, HeaderSchemaVersion, HeaderOccurredAt}

// CheckKey returns an error wrapping outbox.ErrInvalidConfig unless key
// is empty (no signing) or at least MinKeyLen bytes long; what names the
// setting in the error.
func CheckKey(what string, key []byte) error {
	if len(key) > 0 && len(key) < MinKeyLen {
		return fmt.Errorf("%w: %s must have at least %d bytes (a random secret), got %d", outbox.ErrInvalidConfig, what, MinKeyLen, len(key))
	}
	return nil
}

// Sign returns the HeaderSignature value of e's message with key:
// "v1=" and the unpadded base64url HMAC-SHA256, under key, of the outbox
// metadata headers (event id, type, aggregate type and id, tenant, schema
// version, occurrence time, each as the message carries it) and the
// payload, each length-prefixed. It binds the event id to its content and
// to its source, the holder of key: a consumer with the key (Verify; the
// inbox's VerifyKeys) refuses a message forged with an upcoming event's
// id, which then cannot suppress the real one. The envelope's own
// headers (traceparent, …) are not bound. A redelivery of e has the same
// signature.
func Sign(key []byte, e outbox.Envelope) string {
	var vals [len(signed)]string
	rangeMetadata(e, func(k, v string) {
		for i, name := range signed {
			if name == k {
				vals[i] = v
				return
			}
		}
	})
	return signature(key, vals, e.Payload())
}

// Verify returns nil if headers (a message's, by exact name) carry in
// HeaderSignature the signature that one of keys gives the message of
// those headers and payload, and otherwise an error wrapping
// ErrSignature. Several keys let a consumer take messages signed with
// the old and the new key while the key is changed.
func Verify(keys [][]byte, headers map[string]string, payload []byte) error {
	got, ok := headers[HeaderSignature]
	if !ok {
		return fmt.Errorf("%w: the message has no %s header", ErrSignature, HeaderSignature)
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no key to verify it with", ErrSignature)
	}
	var vals [len(signed)]string
	for i, name := range signed {
		vals[i] = headers[name]
	}
	for _, key := range keys {
		if hmac.Equal([]byte(got), []byte(signature(key, vals, payload))) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s of event %q does not match the message under any key", ErrSignature, HeaderSignature, headers[HeaderEventID])
}

func signature(key []byte, vals [len(signed)]string, payload []byte) string {
	mac := hmac.New(sha256.New, key)
	for _, v := range vals {
		writeField(mac, []byte(v))
	}
	writeField(mac, payload)
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
