package leiden

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ReadEdges parses `source<TAB>target<TAB>weight` lines (weight optional,
// default 1.0, as GraphRAG does for a missing weight column). Blank lines
// are skipped; any other malformed line is an error naming its line number.
func ReadEdges(r io.Reader) ([]Edge, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var edges []Edge
	lineNo := 0
	for {
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			if err == io.EOF {
				return edges, nil
			}
			return nil, fmt.Errorf("leiden: reading edges after line %d: %w", lineNo, err)
		}
		lineNo++
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			if err == io.EOF {
				return edges, nil
			}
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 2 && len(f) != 3 {
			return nil, fmt.Errorf("leiden: line %d: want source<TAB>target<TAB>weight, got %d fields", lineNo, len(f))
		}
		if f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("leiden: line %d: empty node id", lineNo)
		}
		w := 1.0
		if len(f) == 3 {
			w, err = strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
			if err != nil {
				return nil, fmt.Errorf("leiden: line %d: bad weight %q", lineNo, f[2])
			}
			if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
				return nil, fmt.Errorf("leiden: line %d: weight %q: %w", lineNo, f[2], ErrInvalidWeight)
			}
		}
		edges = append(edges, Edge{Source: f[0], Target: f[1], Weight: w})
		if err == io.EOF {
			return edges, nil
		}
	}
}

// WriteFlat writes `node<TAB>cluster` lines in node-id (first-seen) order,
// the format of the *.flat.tsv fixtures.
func WriteFlat(w io.Writer, net *Network, clusters []int) error {
	if len(clusters) != net.NumNodes() {
		return ErrClusterCount
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	for i, c := range clusters {
		buf = append(buf[:0], net.labels[i]...)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(c), 10)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteHierarchical writes `node<TAB>cluster<TAB>level<TAB>parent<TAB>is_final`
// lines (parent -1 for none, is_final true/false), the *.hierN.tsv format.
func WriteHierarchical(w io.Writer, rows []HierarchicalCluster) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	for _, r := range rows {
		buf = append(buf[:0], r.Node...)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(r.Cluster), 10)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(r.Level), 10)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(r.Parent), 10)
		buf = append(buf, '\t')
		buf = strconv.AppendBool(buf, r.IsFinal)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
