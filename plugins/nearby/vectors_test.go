package nearby_test

import (
	"testing"

	"github.com/allocd/allocd/internal/vectortest"
	"github.com/allocd/allocd/plugins/nearby"
	"github.com/allocd/allocd/plugins/rocketmq"
)

const vectorsPath = "../../testdata/rocketmq-java-vectors-rooms-small.jsonl"

// TestJavaVectors runs every recorded nearby vector through the plugin's strategy natively, alone
// and as whole groups: the same queues in the same order, an error exactly where Java threw.
func TestJavaVectors(t *testing.T) {
	n := vectortest.Run(t, vectorsPath, rocketmq.StrategyNearby, nearby.Info, nearby.Prepare)
	t.Logf("%d vectors", n)
}
