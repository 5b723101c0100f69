package serial

import (
	"errors"

	"edgeq/internal/jsonfield"
)

// Errors of the json format's device lookup (counted as DropBadDevice).
var (
	errJSONNoDevice  = errors.New("json: device field not found")
	errJSONBadDevice = errors.New("json: device field is not a string or an integer")
)

// jsonDevice returns the device ID at path in doc, a document json.Valid
// accepts. Each path segment is an object key; when a key repeats, the last
// one wins (as encoding/json decides). The value must be a string or an
// integer literal; a string's escapes are decoded. The result may alias doc.
func jsonDevice(doc []byte, path []string) ([]byte, error) {
	raw, n := jsonfield.Lookup(doc, path)
	if n < len(path) {
		return nil, errJSONNoDevice
	}
	dev, ok := jsonfield.Scalar(raw)
	if !ok {
		return nil, errJSONBadDevice
	}
	return dev, nil
}
