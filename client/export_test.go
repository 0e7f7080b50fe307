package client

// PendingHeartbeats is the number of heartbeats waiting for a batch.
func (c *Client) PendingHeartbeats() int {
	c.batch.mu.Lock()
	defer c.batch.mu.Unlock()
	return len(c.batch.pending)
}

// MaxBatch is the most heartbeats one batch request carries.
const MaxBatch = maxBatch

// MaxPollBatch is the most long-polls one batch request carries.
const MaxPollBatch = maxPollBatch
