// quantity-check reads Kubernetes quantities, one JSON string per line on
// stdin, and answers one JSON object per line with what
// k8s.io/apimachinery/pkg/api/resource makes of each: whether it parses, the
// canonical String() the API server stores, whether a JSON round trip (what
// happens to a patched node) keeps it as written, and whether the value fits
// int64 in millis (CPU) and in whole units (memory).
package main

import (
	"bufio"
	"encoding/json"
	"math"
	"math/big"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

type answer struct {
	In        string `json:"in"`
	OK        bool   `json:"ok"`
	Err       string `json:"err,omitempty"`
	Canonical string `json:"canonical,omitempty"`
	RoundTrip string `json:"roundTrip,omitempty"`
	MilliFits bool   `json:"milliFitsInt64"`
	UnitFits  bool   `json:"unitFitsInt64"`
	Milli     string `json:"milli,omitempty"`
	Unit      string `json:"unit,omitempty"`
}

var maxInt64 = new(big.Int).SetInt64(math.MaxInt64)

// ceil of the exact value times 10^scale, as the API server rounds (away from zero for positives).
func scaled(q resource.Quantity, scale int64) *big.Int {
	d := q.AsDec()
	unscaled := new(big.Int).Set(d.UnscaledBig())
	exp := int64(-d.Scale()) + scale
	if exp >= 0 {
		return unscaled.Mul(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(exp), nil))
	}
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(-exp), nil)
	q2, r := new(big.Int).QuoRem(unscaled, div, new(big.Int))
	if r.Sign() > 0 {
		q2.Add(q2, big.NewInt(1))
	} else if r.Sign() < 0 {
		q2.Sub(q2, big.NewInt(1))
	}
	return q2
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var s string
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			_ = enc.Encode(answer{Err: "line is not a JSON string: " + err.Error()})
			continue
		}
		a := answer{In: s}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			a.Err = err.Error()
			_ = enc.Encode(a)
			continue
		}
		a.OK = true
		a.Canonical = q.String()
		var back resource.Quantity
		if err := json.Unmarshal([]byte(`"`+s+`"`), &back); err == nil {
			if b, err := json.Marshal(back); err == nil {
				_ = json.Unmarshal(b, &a.RoundTrip)
			}
		}
		milli, unit := scaled(q, 3), scaled(q, 0)
		a.Milli, a.Unit = milli.String(), unit.String()
		a.MilliFits = milli.Cmp(maxInt64) <= 0 && milli.Sign() >= 0
		a.UnitFits = unit.Cmp(maxInt64) <= 0 && unit.Sign() >= 0
		_ = enc.Encode(a)
	}
}
