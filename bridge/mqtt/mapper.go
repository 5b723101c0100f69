package mqtt

import (
	"errors"

	"edgeq/wal"
)

// Reason says why a message was not stored. Reasons are metric label values
// and the keys of the API's counters by reason (plain strings there).
type Reason = string

// Reasons a message cannot be mapped to a device (acked, counted, logged).
const (
	ReasonNoMatch      Reason = "no_match"      // the topic does not fit the template
	ReasonBadDeviceID  Reason = "bad_device_id" // the mapped ID is not 1–128 bytes of [A-Za-z0-9_:@-]
	ReasonBadJSON      Reason = "bad_json"      // the payload is not a JSON object
	ReasonMissingField Reason = "missing_field" // the JSON field is not there
	ReasonFieldType    Reason = "field_type"    // the JSON field is not a string or an integer
)

// Reasons the log refused a record for good: a redelivery would be refused
// again, so the message is acked and counted.
const (
	ReasonTooLarge       Reason = "too_large"        // wal.ErrTooLarge
	ReasonTooManyDevices Reason = "too_many_devices" // wal.ErrTooManyDevices
)

// Reasons a QoS 0 message was dropped (there is no redelivery for QoS 0).
const (
	ReasonQueueFull     Reason = "queue_full"     // the queue was more than half full
	ReasonStoragePaused Reason = "storage_paused" // after a storage error on this connection
	ReasonStorageError  Reason = "storage_error"  // the append failed
	ReasonStopping      Reason = "stopping"       // arrived during Stop
)

// Mapper turns a message into a device ID, by topic template or JSON field.
// It is pure and safe for concurrent use.
type Mapper struct {
	template *TopicTemplate
	field    *JSONField
}

// NewMapper builds the mapper that d describes.
func NewMapper(d DeviceConfig) (*Mapper, error) {
	switch {
	case d.Topic != "" && d.JSONField != "":
		return nil, errors.New("device: set topic or json_field, not both")
	case d.Topic != "":
		t, err := CompileTemplate(d.Topic)
		if err != nil {
			return nil, err
		}
		return &Mapper{template: t}, nil
	case d.JSONField != "":
		f, err := ParseJSONField(d.JSONField)
		if err != nil {
			return nil, err
		}
		return &Mapper{field: f}, nil
	}
	return nil, errors.New("device: set topic or json_field")
}

// Device returns the message's device ID, or the reason there is none. The
// device is valid for the log (wal.ValidateDeviceID).
func (m *Mapper) Device(topic string, payload []byte) (string, Reason) {
	var device string
	if m.template != nil {
		d, ok := m.template.Match(topic)
		if !ok {
			return "", ReasonNoMatch
		}
		device = d
	} else {
		d, err := m.field.Extract(payload)
		switch {
		case errors.Is(err, errBadJSON):
			return "", ReasonBadJSON
		case errors.Is(err, errMissingField):
			return "", ReasonMissingField
		case err != nil:
			return "", ReasonFieldType
		}
		device = d
	}
	if wal.ValidateDeviceID(device) != nil {
		return "", ReasonBadDeviceID
	}
	return device, ""
}
