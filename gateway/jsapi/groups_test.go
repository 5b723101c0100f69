package jsapi

import (
	"fmt"
	"slices"
	"testing"

	"edgeq/gateway/groups"
)

// TestQueueGroupsAsConsumers: queue groups that are not consumers show in
// CONSUMER.NAMES, LIST and INFO by their queue name (not one whose name is
// no consumer name, nor a name two filters share), and CONSUMER.DELETE
// hands them to DeleteGroup, answering its refusal as 409/10003.
func TestQueueGroupsAsConsumers(t *testing.T) {
	var deleted []groups.GroupKey
	refuse := ""
	b := newBed(t, func(c *Config) {
		c.DeleteGroup = func(k groups.GroupKey) error {
			if refuse != "" {
				return fmt.Errorf("%s", refuse)
			}
			deleted = append(deleted, k)
			return nil
		}
	})
	b.create("cons", map[string]any{"durable_name": "cons"})
	for _, k := range []groups.GroupKey{{Filter: "telemetry.>", Queue: "core"}, {Filter: "telemetry.>", Queue: "a.b"},
		{Filter: "telemetry.>", Queue: "twice"}, {Filter: "telemetry.d1", Queue: "twice"}} {
		if err := b.reg.Declare(groups.GroupConfig{Key: k, Core: groups.DefaultCoreConfig()}); err != nil {
			t.Fatal(err)
		}
	}
	out := b.call("CONSUMER.NAMES.TELEMETRY", "")
	var names []string
	for _, n := range out["consumers"].([]any) {
		names = append(names, n.(string))
	}
	if !slices.Equal(names, []string{"cons", "core"}) {
		t.Fatalf("names: %v", names)
	}
	if list := b.call("CONSUMER.LIST.TELEMETRY", ""); list["total"] != float64(2) {
		t.Fatalf("list: %v", list)
	}
	info := b.call("CONSUMER.INFO.TELEMETRY.core", "")
	cfg, _ := info["config"].(map[string]any)
	if errCode(info) != 0 || cfg["description"] != GroupDescription || cfg["filter_subject"] != "telemetry.>" || cfg["durable_name"] != "core" {
		t.Fatalf("info: %v", info)
	}
	if out := b.call("CONSUMER.INFO.TELEMETRY.twice", ""); errCode(out) != CodeConsumerNotFound {
		t.Fatalf("an ambiguous name: %v", out)
	}
	refuse = "queue group has members"
	if out := b.call("CONSUMER.DELETE.TELEMETRY.core", ""); errCode(out) != CodeConsumerInUse || len(deleted) != 0 {
		t.Fatalf("refused delete: %v", out)
	}
	refuse = ""
	if out := b.call("CONSUMER.DELETE.TELEMETRY.core", ""); out["success"] != true || len(deleted) != 1 || deleted[0].Queue != "core" {
		t.Fatalf("delete: %v %v", out, deleted)
	}
	if out := b.call("CONSUMER.DELETE.TELEMETRY.nosuch", ""); errCode(out) != CodeConsumerNotFound {
		t.Fatalf("delete of nothing: %v", out)
	}
}
