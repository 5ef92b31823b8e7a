package k8s

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/kgstream/kgstream/pkg/auth"
	"github.com/kgstream/kgstream/pkg/resolve"
	"github.com/kgstream/kgstream/services/gateway"
)

// services are the kgstream binaries with a Deployment each.
var services = []string{"gateway", "extractor", "resolver", "clusterer", "reporter", "query"}

// rendered is one kustomization's output, decoded.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         map[string]*policyv1.PodDisruptionBudget
	monitors     map[string]*serviceMonitor
	namespaces   map[string]*corev1.Namespace
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// these manifests use; decoding is strict, so any other field fails.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// render runs kubectl kustomize on dir and strictly decodes every object.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed to render the manifests: %v", err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr)
	}
	return decodeAll(t, out)
}

func decodeAll(t *testing.T, out []byte) *rendered {
	t.Helper()
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, monitors: map[string]*serviceMonitor{}, namespaces: map[string]*corev1.Namespace{}}
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(out), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("reading the kind of an object: %v\n%s", err, doc)
		}
		var name string
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			name, err = strictInto(doc, r.deployments)
		case "apps/v1 StatefulSet":
			name, err = strictInto(doc, r.statefulSets)
		case "v1 Service":
			name, err = strictInto(doc, r.services)
		case "v1 ConfigMap":
			name, err = strictInto(doc, r.configMaps)
		case "v1 Secret":
			name, err = strictInto(doc, r.secrets)
		case "policy/v1 PodDisruptionBudget":
			name, err = strictInto(doc, r.pdbs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			name, err = strictInto(doc, r.monitors)
		case "v1 Namespace":
			name, err = strictInto(doc, r.namespaces)
		default:
			t.Fatalf("unexpected object %s %s", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			t.Fatalf("decoding %s %s strictly: %v", tm.Kind, name, err)
		}
	}
	return r
}

// named is an object with metadata.
type named interface{ GetName() string }

// strictInto decodes doc into a new T, refusing unknown and duplicate
// fields, and files it under its name (a second object of that name fails).
func strictInto[T any, PT interface {
	*T
	named
}](doc string, into map[string]PT) (string, error) {
	obj := PT(new(T))
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return "", err
	}
	name := obj.GetName()
	if name == "" {
		return "", fmt.Errorf("object without a name")
	}
	if _, dup := into[name]; dup {
		return name, fmt.Errorf("two objects named %s", name)
	}
	into[name] = obj
	return name, nil
}

func TestStrictDecodeCatchesMisspeltFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n")
	m := map[string]*appsv1.Deployment{}
	if _, err := strictInto(string(doc), m); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded without error: %v", err)
	}
	sm := map[string]*serviceMonitor{}
	doc = []byte("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n  endpoints:\n    - port: http\n      intervall: 15s\n")
	if _, err := strictInto(string(doc), sm); err == nil || !strings.Contains(err.Error(), "intervall") {
		t.Fatalf("a misspelt ServiceMonitor field decoded without error: %v", err)
	}
}

func TestBaseRendersAndHoldsItsInvariants(t *testing.T) {
	r := render(t, "base")
	checkInvariants(t, r)
	for _, c := range kgstreamContainers(r) {
		if c.Image != "kgstream:dev" {
			t.Errorf("base container %s: image %q, want kgstream:dev", c.Name, c.Image)
		}
	}
}

func TestProductionOverlayRendersAndHoldsItsInvariants(t *testing.T) {
	r := render(t, filepath.Join("overlays", "production"))
	checkInvariants(t, r)
	if _, ok := r.namespaces["kgstream"]; !ok {
		t.Error("the production overlay has no kgstream Namespace")
	}
	for _, d := range r.deployments {
		if d.Namespace != "kgstream" {
			t.Errorf("deployment %s in namespace %q", d.Name, d.Namespace)
		}
	}
	for _, c := range kgstreamContainers(r) {
		if c.Image != "registry.example.com/kgstream/kgstream:0.1.0" {
			t.Errorf("production container %s: image %q is not the pinned one", c.Name, c.Image)
		}
	}
	if got := *r.deployments["query"].Spec.Replicas; got != 3 {
		t.Errorf("production query replicas %d, want 3", got)
	}
	if got := r.deployments["query"].Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1" {
		t.Errorf("production query cpu request %s, want 1", got)
	}
	if got := *r.deployments["clusterer"].Spec.Replicas; got != 2 {
		t.Errorf("production clusterer replicas %d, want 2 (one holds the lease, one stands by)", got)
	}
}

// hasLease reports whether args set a clusterer lease (--lease-ttl above
// zero; the binary's default is 15s, so leaving it out counts too).
func hasLease(args []string) bool {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--lease-ttl="); ok {
			d, err := time.ParseDuration(v)
			return err == nil && d > 0
		}
	}
	return true
}

// kgstreamContainers are the containers that run a kgstream binary.
func kgstreamContainers(r *rendered) []corev1.Container {
	var cs []corev1.Container
	for _, name := range services {
		if d, ok := r.deployments[name]; ok {
			cs = append(cs, d.Spec.Template.Spec.Containers...)
		}
	}
	return cs
}

func checkInvariants(t *testing.T, r *rendered) {
	t.Helper()
	var names []string
	for n := range r.deployments {
		names = append(names, n)
	}
	slices.Sort(names)
	want := slices.Clone(services)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("deployments %v, want one per service %v", names, want)
	}
	for name, d := range r.deployments {
		checkDeployment(t, r, name, d)
	}
	// Clusterer replicas take turns by a lease: more than one is safe only
	// with a lease (--lease-ttl above zero).
	if d := r.deployments["clusterer"]; *d.Spec.Replicas > 1 && !hasLease(d.Spec.Template.Spec.Containers[0].Args) {
		t.Errorf("clusterer: %d replicas without --lease-ttl > 0; replicas would cluster at once", *d.Spec.Replicas)
	}
	for name, s := range r.statefulSets {
		checkPodSpec(t, r, "statefulset "+name, &s.Spec.Template.Spec)
	}
	checkNATS(t, r)
	checkSelectors(t, r)
	checkMonitors(t, r)
	checkConfigFiles(t, r)
}

func checkDeployment(t *testing.T, r *rendered, name string, d *appsv1.Deployment) {
	t.Helper()
	ps := &d.Spec.Template.Spec
	checkPodSpec(t, r, "deployment "+name, ps)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 {
		t.Errorf("deployment %s: no replicas", name)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("deployment %s: %d containers, want 1", name, len(ps.Containers))
	}
	c := ps.Containers[0]
	if want := "/usr/local/bin/" + name; !slices.Equal(c.Command, []string{want}) {
		t.Errorf("deployment %s: command %v, want [%s]", name, c.Command, want)
	}
	for probe, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe || p.HTTPGet.Port.String() != "http" {
			t.Errorf("deployment %s: probe %s missing or not an HTTP GET on port http: %+v", name, probe, p)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 8080 }) {
		t.Errorf("deployment %s: no http port 8080", name)
	}
	if !slices.Contains(c.Args, "--http=0.0.0.0:8080") {
		t.Errorf("deployment %s: it does not listen on the probed port: %v", name, c.Args)
	}
	sc := ps.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("deployment %s: not running as uid 65532 (non-root)", name)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("deployment %s: root filesystem not read-only", name)
	}
	if pdbFor(r, d.Spec.Template.Labels) == nil {
		t.Errorf("deployment %s: no PodDisruptionBudget selects its pods", name)
	}
}

// checkPodSpec checks every container: image, resources, and that the
// ConfigMaps, Secrets and keys it reads exist.
func checkPodSpec(t *testing.T, r *rendered, what string, ps *corev1.PodSpec) {
	t.Helper()
	for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		if c.Image == "" {
			t.Errorf("%s container %s: no image", what, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s container %s: cpu and memory requests and a memory limit are needed, got %+v", what, c.Name, c.Resources)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s container %s: liveness and readiness probes are needed", what, c.Name)
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				s, ok := r.secrets[ref.Name]
				if !ok {
					t.Errorf("%s container %s: env %s reads missing Secret %s", what, c.Name, e.Name, ref.Name)
				} else if _, ok := s.StringData[ref.Key]; !ok {
					t.Errorf("%s container %s: env %s reads missing key %s of Secret %s", what, c.Name, e.Name, ref.Key, ref.Name)
				}
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				if _, ok := r.configMaps[ef.ConfigMapRef.Name]; !ok {
					t.Errorf("%s container %s: envFrom missing ConfigMap %s", what, c.Name, ef.ConfigMapRef.Name)
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) &&
				!strings.HasPrefix(what, "statefulset") {
				t.Errorf("%s container %s: mount %s has no volume", what, c.Name, m.Name)
			}
		}
	}
	for _, v := range ps.Volumes {
		if v.ConfigMap != nil {
			if _, ok := r.configMaps[v.ConfigMap.Name]; !ok {
				t.Errorf("%s: volume %s reads missing ConfigMap %s", what, v.Name, v.ConfigMap.Name)
			}
		}
		if v.Secret != nil {
			s, ok := r.secrets[v.Secret.SecretName]
			if !ok {
				t.Errorf("%s: volume %s reads missing Secret %s", what, v.Name, v.Secret.SecretName)
				continue
			}
			for _, it := range v.Secret.Items {
				if _, ok := s.StringData[it.Key]; !ok {
					t.Errorf("%s: volume %s reads missing key %s of Secret %s", what, v.Name, it.Key, s.Name)
				}
			}
		}
	}
}

// pdbFor returns the PodDisruptionBudget whose selector matches the pod
// labels, if one does.
func pdbFor(r *rendered, podLabels map[string]string) *policyv1.PodDisruptionBudget {
	for _, p := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels)) {
			return p
		}
	}
	return nil
}

// checkSelectors: every PDB and every Service selects the pods of exactly
// one workload.
func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	templates := map[string]map[string]string{}
	for n, d := range r.deployments {
		templates["deployment "+n] = d.Spec.Template.Labels
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("deployment %s: its selector does not match its own pods", n)
		}
	}
	for n, s := range r.statefulSets {
		templates["statefulset "+n] = s.Spec.Template.Labels
		if _, ok := r.services[s.Spec.ServiceName]; !ok {
			t.Errorf("statefulset %s: governing Service %s missing", n, s.Spec.ServiceName)
		}
	}
	matching := func(sel labels.Selector) []string {
		var ws []string
		for w, l := range templates {
			if sel.Matches(labels.Set(l)) {
				ws = append(ws, w)
			}
		}
		return ws
	}
	for n, p := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("pdb %s: bad or empty selector: %v", n, err)
			continue
		}
		if ws := matching(sel); len(ws) != 1 {
			t.Errorf("pdb %s selects %v, want exactly one workload", n, ws)
		}
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			t.Errorf("pdb %s: set exactly one of minAvailable and maxUnavailable", n)
		}
		if p.Spec.MinAvailable != nil {
			if d, ok := r.deployments[n]; ok && int32(p.Spec.MinAvailable.IntValue()) >= *d.Spec.Replicas {
				t.Errorf("pdb %s: minAvailable %s leaves no pod of %d evictable", n, p.Spec.MinAvailable, *d.Spec.Replicas)
			}
		}
	}
	for n, s := range r.services {
		if len(s.Spec.Selector) == 0 {
			t.Errorf("service %s: no selector", n)
			continue
		}
		if ws := matching(labels.SelectorFromSet(s.Spec.Selector)); len(ws) != 1 {
			t.Errorf("service %s selects %v, want exactly one workload", n, ws)
		}
	}
	for _, name := range services {
		if _, ok := r.services[name]; !ok {
			t.Errorf("service %s: no Service (its /metrics is scraped through one)", name)
		}
	}
}

// checkMonitors: every kgstream Service and the NATS exporter are scraped.
func checkMonitors(t *testing.T, r *rendered) {
	t.Helper()
	scraped := map[string]bool{}
	for n, m := range r.monitors {
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("servicemonitor %s: bad or empty selector", n)
			continue
		}
		if len(m.Spec.Endpoints) == 0 {
			t.Errorf("servicemonitor %s: no endpoints", n)
		}
		for sn, s := range r.services {
			if !sel.Matches(labels.Set(s.Labels)) {
				continue
			}
			for _, ep := range m.Spec.Endpoints {
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					t.Errorf("servicemonitor %s: service %s has no port %s", n, sn, ep.Port)
				}
			}
			scraped[sn] = true
		}
	}
	for _, name := range append(slices.Clone(services), "nats") {
		if !scraped[name] {
			t.Errorf("service %s is not scraped by any ServiceMonitor", name)
		}
	}
}

// checkNATS: three servers routed to each other, JetStream with
// sync_interval always, parsed by the NATS server's own config reader.
func checkNATS(t *testing.T, r *rendered) {
	t.Helper()
	ss, ok := r.statefulSets["nats"]
	if !ok {
		t.Fatal("no nats StatefulSet")
	}
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 {
		t.Errorf("nats: %v replicas, want 3", ss.Spec.Replicas)
	}
	if len(ss.Spec.VolumeClaimTemplates) == 0 {
		t.Error("nats: no persistent volume for JetStream")
	}
	cm, ok := r.configMaps["nats-config"]
	if !ok {
		t.Fatal("no nats-config ConfigMap")
	}
	conf := cm.Data["nats.conf"]
	if !regexp.MustCompile(`(?s)jetstream\s*\{[^}]*\bsync_interval:\s*always\b`).MatchString(conf) {
		t.Errorf("nats.conf: jetstream block lacks sync_interval: always:\n%s", conf)
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "nats-1")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server refuses nats.conf: %v", err)
	}
	if !opts.JetStream || !opts.SyncAlways {
		t.Errorf("nats.conf: jetstream %v, sync always %v; want both", opts.JetStream, opts.SyncAlways)
	}
	if opts.ServerName != "nats-1" {
		t.Errorf("nats.conf: server_name %q, want the pod name", opts.ServerName)
	}
	var routes []string
	for _, u := range opts.Routes {
		routes = append(routes, u.Host)
	}
	var want []string
	for i := range int(*ss.Spec.Replicas) {
		want = append(want, fmt.Sprintf("%s-%d.%s:%d", ss.Name, i, ss.Spec.ServiceName, opts.Cluster.Port))
	}
	if !slices.Equal(routes, want) {
		t.Errorf("nats.conf: routes %v, want one per pod %v", routes, want)
	}
	if opts.Cluster.Name == "" {
		t.Error("nats.conf: cluster has no name")
	}
	c := ss.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"--config", "/etc/nats/nats.conf"}) {
		t.Errorf("nats: args %v do not load the ConfigMap's nats.conf", c.Args)
	}
}

// checkConfigFiles loads the ConfigMap's and the Secret's files with the
// readers the services use, so a template that would not start fails here.
func checkConfigFiles(t *testing.T, r *rendered) {
	t.Helper()
	cm, ok := r.configMaps["kgstream-config"]
	if !ok {
		t.Fatal("no kgstream-config ConfigMap")
	}
	sec, ok := r.secrets["kgstream-secrets"]
	if !ok {
		t.Fatal("no kgstream-secrets Secret")
	}
	if _, err := resolve.ParseAliases([]byte(cm.Data["aliases.yaml"])); err != nil {
		t.Errorf("aliases.yaml: %v", err)
	}
	dir := t.TempDir()
	for k, v := range sec.StringData {
		if strings.HasPrefix(k, "KG_") {
			t.Setenv(k, v)
		}
	}
	wh := filepath.Join(dir, "webhooks.yaml")
	if err := os.WriteFile(wh, []byte(cm.Data["webhooks.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.LoadWebhooks(wh); err != nil {
		t.Errorf("webhooks.yaml: %v", err)
	}
	tok := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tok, []byte(sec.StringData["tokens.json"]), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.LoadFile(tok)
	if err == nil {
		_, err = auth.New(toks, nil)
	}
	if err != nil {
		t.Errorf("tokens.json: %v", err)
	}
	for k := range r.configMaps["kgstream-env"].Data {
		if !strings.HasPrefix(k, "KG_") {
			t.Errorf("kgstream-env: %s is not a KG_ variable", k)
		}
	}
	var mentioned bytes.Buffer
	for _, d := range r.deployments {
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			mentioned.WriteString(a + "\n")
		}
	}
	for _, f := range []string{"aliases.yaml", "webhooks.yaml"} {
		if !strings.Contains(mentioned.String(), "/etc/kgstream/config/"+f) {
			t.Errorf("kgstream-config's %s is read by no service", f)
		}
	}
}
