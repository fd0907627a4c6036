// circllhist-decode: the Go reference of circllhist (github.com/circonus-labs/circonusllhist)
// reading what histd sends, for the circonus backend's golden-bytes test. Each input line is
// a JSON object {"histogram": "<base64 as histd sent it>", "values": [the values recorded]};
// each output line is {"reserialized": the histogram decoded and serialized again,
// "recorded": the values recorded by the Go library and serialized, "bins": its bins as
// H[value]=count strings, "recorded_bins" those of the recorded values, "quantiles":
// ApproxQuantile at 0, 0.5, 0.9, 0.99, 1}.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	"github.com/circonus-labs/circonusllhist"
)

type input struct {
	Histogram string    `json:"histogram"`
	Values    []float64 `json:"values"`
}

type output struct {
	Reserialized string    `json:"reserialized"`
	Recorded     string    `json:"recorded"`
	Bins         []string  `json:"bins"`
	RecordedBins []string  `json:"recorded_bins"`
	Quantiles    []float64 `json:"quantiles"`
	Error        string    `json:"error,omitempty"`
}

// serialize is the library's Serialize of the histogram's bins in use. v0.1.3 writes its
// whole allocated bin array (100 bins at first, the unused ones as zero records), which the C
// reference never does: the bin count is set to the bins in use and the zero records after
// them are cut. Each record is val, exp, a length code L, then L+1 count bytes.
func serialize(h *circonusllhist.Histogram) string {
	var out bytes.Buffer
	h.Serialize(&out)
	raw := out.Bytes()
	used := len(h.DecStrings())
	at := 2
	for i := 0; i < used; i++ {
		at += 3 + int(raw[at+2]) + 1
	}
	trimmed := append([]byte{byte(used >> 8), byte(used)}, raw[2:at]...)
	return base64.StdEncoding.EncodeToString(trimmed)
}

func answer(line []byte) output {
	var in input
	if err := json.Unmarshal(line, &in); err != nil {
		return output{Error: err.Error()}
	}
	raw, err := base64.StdEncoding.DecodeString(in.Histogram)
	if err != nil {
		return output{Error: "base64: " + err.Error()}
	}
	decoded, err := circonusllhist.Deserialize(bytes.NewReader(raw))
	if err != nil {
		return output{Error: "deserialize: " + err.Error()}
	}
	recorded := circonusllhist.New()
	for _, value := range in.Values {
		recorded.RecordValue(value)
	}
	// An empty histogram has no quantiles (the library says empty_histogram).
	quantiles, _ := decoded.ApproxQuantile([]float64{0, 0.5, 0.9, 0.99, 1})
	return output{
		Reserialized: serialize(decoded),
		Recorded:     serialize(recorded),
		Bins:         decoded.DecStrings(),
		RecordedBins: recorded.DecStrings(),
		Quantiles:    quantiles,
	}
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	encoder := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		if err := encoder.Encode(answer(scanner.Bytes())); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
