package mqtt

import (
	"os"
	"testing"
)

// The crash test runs the bridge and its log in a child process: the test
// binary itself, started with these variables set (see TestMain).
const (
	childDirEnv    = "EDGEQ_MQTT_CHILD_DIR"
	childBrokerEnv = "EDGEQ_MQTT_CHILD_BROKER"
	childIDEnv     = "EDGEQ_MQTT_CHILD_CLIENT_ID"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(runChild(dir, os.Getenv(childBrokerEnv), os.Getenv(childIDEnv)))
	}
	os.Exit(m.Run())
}
