// quantity-check tells what Kubernetes' own parser,
// k8s.io/apimachinery/pkg/api/resource, makes of quantities.
//
// Input: one JSON string per line on stdin. Output: one JSON object per input
// line, in order, on stdout:
//
//	in              the string as read
//	ok, err         whether resource.ParseQuantity accepts it, and why not
//	canonical       q.String(): what the API server stores (a quantity is kept
//	                as written when this equals in)
//	roundTrip       json.Unmarshal of the JSON string into a Quantity, then
//	                json.Marshal: what happens to a quantity in a patched node
//	                (roundTripErr when the JSON decode refuses it)
//	milli, unit     the exact value in millis (CPU) and in whole units (memory),
//	                rounded away from zero, as decimal strings of any size
//	milliFitsInt64, unitFitsInt64
//	                whether those lie within int64
//	milliValue, value
//	                what q.MilliValue() and q.Value() return: what the scheduler
//	                and kubelet compare. They overflow without a word, so they
//	                mean something only where the *FitsInt64 field is true.
//
// A line that is not a JSON string gets an object with only err set.
package main

import (
	"bufio"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

type answer struct {
	In             string `json:"in"`
	OK             bool   `json:"ok"`
	Err            string `json:"err,omitempty"`
	Canonical      string `json:"canonical,omitempty"`
	RoundTrip      string `json:"roundTrip,omitempty"`
	RoundTripErr   string `json:"roundTripErr,omitempty"`
	Milli          string `json:"milli,omitempty"`
	Unit           string `json:"unit,omitempty"`
	MilliFitsInt64 bool   `json:"milliFitsInt64"`
	UnitFitsInt64  bool   `json:"unitFitsInt64"`
	MilliValue     string `json:"milliValue,omitempty"`
	Value          string `json:"value,omitempty"`
}

var (
	maxInt64 = big.NewInt(math.MaxInt64)
	minInt64 = big.NewInt(math.MinInt64)
)

// scaled is the exact value times 10^scale, rounded away from zero. It works
// on a copy: AsDec converts the quantity it is called on to its inf.Dec form,
// which changes how ScaledValue rounds negative values.
func scaled(q resource.Quantity, scale int64) *big.Int {
	d := q.AsDec()
	n := new(big.Int).Set(d.UnscaledBig())
	exp := scale - int64(d.Scale())
	if exp >= 0 {
		return n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(exp), nil))
	}
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(-exp), nil)
	quo, rem := new(big.Int).QuoRem(n, div, new(big.Int))
	return quo.Add(quo, big.NewInt(int64(rem.Sign())))
}

func fits(n *big.Int) bool { return n.Cmp(minInt64) >= 0 && n.Cmp(maxInt64) <= 0 }

func check(s string) answer {
	a := answer{In: s}
	a.RoundTrip, a.RoundTripErr = throughJSON(s)
	q, err := resource.ParseQuantity(s)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	a.OK = true
	// On a fresh parse, as the API server and kubelet see it.
	a.MilliValue = strconv.FormatInt(q.MilliValue(), 10)
	a.Value = strconv.FormatInt(q.Value(), 10)
	a.Canonical = q.String()

	milli, unit := scaled(q, 3), scaled(q, 0)
	a.Milli, a.Unit = milli.String(), unit.String()
	a.MilliFitsInt64, a.UnitFitsInt64 = fits(milli), fits(unit)
	return a
}

// throughJSON decodes s as a JSON string into a Quantity and encodes it again,
// as the API server does with a quantity in a patched object. Decoding trims
// spaces that ParseQuantity alone refuses.
func throughJSON(s string) (string, string) {
	in, _ := json.Marshal(s)
	var decoded resource.Quantity
	if err := json.Unmarshal(in, &decoded); err != nil {
		return "", err.Error()
	}
	out, err := json.Marshal(decoded)
	if err != nil {
		return "", err.Error()
	}
	var back string
	if err := json.Unmarshal(out, &back); err != nil {
		return "", err.Error()
	}
	return back, ""
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var s string
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			_ = enc.Encode(answer{Err: "line is not a JSON string: " + err.Error()})
			continue
		}
		_ = enc.Encode(check(s))
	}
	if err := in.Err(); err != nil {
		os.Stderr.WriteString("quantity-check: reading stdin: " + err.Error() + "\n")
		os.Exit(1)
	}
	if err := out.Flush(); err != nil {
		os.Stderr.WriteString("quantity-check: writing stdout: " + err.Error() + "\n")
		os.Exit(1)
	}
}
