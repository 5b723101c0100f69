module edgeq

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/chromedp/chromedp v0.23.1
	github.com/creack/pty v1.1.24
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/hashicorp/mdns v1.0.7
	github.com/miekg/dns v1.1.72
	github.com/nats-io/nats.go v1.55.0
	github.com/prometheus/common v0.74.0
	github.com/prometheus/procfs v0.23.0
	github.com/tidwall/wal v1.2.1
	go.bug.st/serial v1.8.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	golang.org/x/time v0.16.0
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/mod v0.31.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.40.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
