// Package leiden implements Leiden community detection (Traag, Waltman & van
// Eck 2019) and the hierarchical variant that Microsoft GraphRAG uses, so
// that kgstream's communities are identical to GraphRAG's on the same graph.
//
// The optimiser follows graspologic-native 1.2.5 (the network_partitions
// crate that GraphRAG pins) step for step, including its random number
// generator, its visiting orders, its floating-point summation orders and its
// deviations from the paper; see /work/shared/design/LEIDEN.md. That is what
// makes the outputs reproduce the library's row for row rather than merely
// being "a Leiden clustering".
//
// Deviations from graspologic-native, all in inputs where the library
// panics, errors out or behaves randomly (HashMap order):
//   - A node left in a community without any edge into it (possible only with
//     zero-weight edges) becomes its own refined cluster and its own starting
//     community on the aggregate network instead of keeping a stale id.
//   - A starting partition is compacted after the sanity pass, and the sanity
//     pass visits communities and nodes in ascending order.
//   - In the CPM refinement the library reads garbage (and usually panics);
//     here refinement uses the CPM node weights and the intra-cluster degree.
//   - A hierarchical work item whose subnetwork has no edges is treated as
//     unsplittable instead of failing the whole run.
//
// Portions of this package are a Go port of graspologic-native:
//
//	Copyright (c) Microsoft Corporation.
//	Licensed under the MIT license.
//
//	Permission is hereby granted, free of charge, to any person obtaining a
//	copy of this software and associated documentation files (the
//	"Software"), to deal in the Software without restriction, including
//	without limitation the rights to use, copy, modify, merge, publish,
//	distribute, sublicense, and/or sell copies of the Software, and to permit
//	persons to whom the Software is furnished to do so, subject to the
//	following conditions:
//
//	The above copyright notice and this permission notice shall be included
//	in all copies or substantial portions of the Software.
//
//	THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS
//	OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
//	MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN
//	NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
//	DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
//	OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE
//	USE OR OTHER DEALINGS IN THE SOFTWARE.
package leiden
