package apiv1

// PublishResponse is the answer to POST /v1/publish/{device}.
type PublishResponse struct {
	Node      string `json:"node"`
	Partition int    `json:"partition"`
	Offset    uint64 `json:"offset"`
	Seq       uint64 `json:"seq"`
}

// Error is the answer of every endpoint that failed (4xx, 5xx).
type Error struct {
	Error string `json:"error"`
}
