package wholegrouptest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
)

// wholeGroupCalls counts the calls of the whole-group form; mode steers it.
var (
	wholeGroupCalls int
	mode            string
)

// TestMain registers a round-robin strategy in both forms: queue i belongs to consumer i mod c.
func TestMain(m *testing.M) {
	plugin.RegisterWholeGroup(plugin.Info{Name: "rr", Version: "1"},
		func(*abi.View) (plugin.Func, error) {
			return func(a *plugin.Args, dst []int) ([]int, error) {
				if a.Self < 0 {
					return dst, fmt.Errorf("%q is not a member", a.CID)
				}
				for i := a.Self; i < a.MQAll.Len(); i += a.CIDAll.Len() {
					dst = append(dst, i)
				}
				return dst, nil
			}, nil
		},
		func(v *abi.View, owners []int32) (bool, error) {
			wholeGroupCalls++
			switch mode {
			case "decline":
				return false, nil
			case "fail":
				return false, errors.New("ring too large")
			}
			if len(owners) != v.NumQueues() {
				return false, fmt.Errorf("owners has %d entries for %d queues", len(owners), v.NumQueues())
			}
			for q := range owners {
				owners[q] = int32(q % v.NumConsumers())
			}
			return true, nil
		})
	os.Exit(m.Run())
}

func request(nq int, consumers ...string) *abi.Request {
	r := &abi.Request{Group: "g", Consumers: consumers}
	for i := range nq {
		r.Queues = append(r.Queues, abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(i)})
	}
	return r
}

// call encodes r (with the header's minor version set to minor), runs the SDK natively, and
// returns the answer's magic and the answer after Validate.
func call(t *testing.T, r *abi.Request, minor uint16) (string, *abi.Response) {
	t.Helper()
	in, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	in[6], in[7] = byte(minor), byte(minor>>8)
	wholeGroupCalls = 0
	out, err := plugin.Allocate(in)
	if err != nil {
		t.Fatal(err)
	}
	var resp abi.Response
	if err := abi.DecodeResponse(out, &resp); err != nil {
		t.Fatal(err)
	}
	if err := abi.Validate(r, &resp); err != nil {
		t.Fatal(err)
	}
	return string(out[:4]), &resp
}

// TestOwnerFormForWholeGroup: a 1.1 host's whole-group request gets the owner form, and it means
// what the per-consumer form says for the same consumers.
func TestOwnerFormForWholeGroup(t *testing.T) {
	mode = ""
	r := request(10, "a", "b", "c")
	magic, resp := call(t, r, abi.Minor)
	if magic != abi.OwnersMagic || wholeGroupCalls != 1 {
		t.Fatalf("answer %q after %d whole-group calls, want the owner form after 1", magic, wholeGroupCalls)
	}
	// The same consumers as explicit targets: the per-consumer form.
	r.Targets = slices.Clone(r.Consumers)
	magic, each := call(t, r, abi.Minor)
	if magic != abi.ResponseMagic || wholeGroupCalls != 0 {
		t.Fatalf("targets: answer %q after %d whole-group calls, want the list form", magic, wholeGroupCalls)
	}
	if !resp.Equal(each) {
		t.Fatalf("owner form %+v, per consumer %+v", resp.Results, each.Results)
	}
}

// TestListFormWhenOwnerFormIsNotAllowed: a 1.0 host (minor 0), a repeated consumer id, or a
// declining whole-group form get the list form; an error from it fails the call.
func TestListFormWhenOwnerFormIsNotAllowed(t *testing.T) {
	mode = ""
	if magic, _ := call(t, request(4, "a", "b"), 0); magic != abi.ResponseMagic || wholeGroupCalls != 0 {
		t.Errorf("1.0 host: answer %q after %d whole-group calls, want the list form", magic, wholeGroupCalls)
	}
	magic, resp := call(t, request(4, "a", "a", "b"), abi.Minor)
	if magic != abi.ResponseMagic || wholeGroupCalls != 0 {
		t.Errorf("repeated id: answer %q after %d whole-group calls, want the list form", magic, wholeGroupCalls)
	}
	if !slices.Equal(resp.Results[0].Indices, resp.Results[1].Indices) {
		t.Errorf("repeated id: %v and %v differ", resp.Results[0].Indices, resp.Results[1].Indices)
	}
	mode = "decline"
	if magic, _ := call(t, request(4, "a", "b"), abi.Minor); magic != abi.ResponseMagic || wholeGroupCalls != 1 {
		t.Errorf("declined: answer %q after %d whole-group calls, want the list form after 1", magic, wholeGroupCalls)
	}
	mode = "fail"
	in, _ := abi.EncodeRequest(nil, request(4, "a", "b"))
	if out, err := plugin.Allocate(in); err == nil || err.Error() != "ring too large" || out != nil {
		t.Errorf("failing whole-group form: %x, %v; want the call to fail with its error", out, err)
	}
	mode = ""
}
