// Porcupine's verdict on a one-key register history in our JSONL (benchmarks/bench_cas_register.py).
//
// Usage: porcupine_cas HISTORY.jsonl TIMEOUT_SECONDS; prints ok, illegal or unknown. An info op may
// have happened or not (a nondeterministic step); its interval stays open to the end of the history.
// A failed cas observed that the register did not hold its `from`, as checkers/models.py reads it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

type event struct {
	Process interface{}     `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Value   json.RawMessage `json:"value"`
	Time    int64           `json:"time"`
}

type input struct {
	f    string
	a, b string // write a; cas a -> b; read: a is what it returned
	kind string // ok, fail, info
}

func text(raw json.RawMessage) string { return string(raw) }

func pair(raw json.RawMessage) (string, string) {
	var two []json.RawMessage
	if err := json.Unmarshal(raw, &two); err != nil || len(two) != 2 {
		fmt.Fprintf(os.Stderr, "cas value must be [from, to]: %s\n", raw)
		os.Exit(254)
	}
	return text(two[0]), text(two[1])
}

func main() {
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(254)
	}
	seconds, _ := strconv.ParseFloat(os.Args[2], 64)
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	open := map[string]int{}
	var ops []porcupine.Operation
	for scanner.Scan() {
		var ev event
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(254)
		}
		proc := fmt.Sprint(ev.Process)
		if proc == "nemesis" {
			continue
		}
		if ev.Type == "invoke" {
			in := input{f: ev.F}
			if ev.F == "write" {
				in.a = text(ev.Value)
			} else if ev.F == "cas" {
				in.a, in.b = pair(ev.Value)
			}
			open[proc] = len(ops)
			ops = append(ops, porcupine.Operation{ClientId: len(ops), Input: in, Call: ev.Time, Return: math.MaxInt64})
			continue
		}
		k, found := open[proc]
		if !found {
			continue
		}
		delete(open, proc)
		in := ops[k].Input.(input)
		in.kind = ev.Type
		if ev.F == "read" && ev.Type == "ok" {
			in.a = text(ev.Value)
		}
		ops[k].Input = in
		if ev.Type != "info" {
			ops[k].Return = ev.Time
		}
	}
	var kept []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(input)
		if (in.f == "read" && in.kind != "ok") || (in.f == "write" && in.kind == "fail") {
			continue // constrains nothing / did not happen
		}
		if in.kind == "" {
			in.kind = "info"
			op.Input = in
		}
		kept = append(kept, op)
	}
	model := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{"null"} },
		Step: func(state, inp, _ interface{}) []interface{} {
			s, in := state.(string), inp.(input)
			switch {
			case in.f == "read":
				if s == in.a {
					return []interface{}{s}
				}
				return nil
			case in.f == "write" && in.kind == "info":
				return []interface{}{s, in.a}
			case in.f == "write":
				return []interface{}{in.a}
			case in.kind == "fail":
				if s != in.a {
					return []interface{}{s}
				}
				return nil
			case in.kind == "info":
				if s == in.a {
					return []interface{}{s, in.b}
				}
				return []interface{}{s}
			default:
				if s == in.a {
					return []interface{}{in.b}
				}
				return nil
			}
		},
	}
	res := porcupine.CheckOperationsTimeout(model.ToModel(), kept, time.Duration(seconds*float64(time.Second)))
	fmt.Println(res)
}
