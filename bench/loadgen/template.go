package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// reviewTemplate is the AdmissionReview body cut at its placeholders, so a
// request's body is a few appends rather than a search through 36 KB.
type reviewTemplate struct {
	parts [][]byte
	// slots[i] says what goes between parts[i] and parts[i+1]: slotNode or slotUID.
	slots []int
	size  int
}

const (
	slotNode = iota
	slotUID
)

func loadTemplate(path, nodePlaceholder, uidPlaceholder string) (*reviewTemplate, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--template: %v", err)
	}
	var review struct {
		Request *struct {
			UID *string `json:"uid"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("--template %s is not JSON: %v", path, err)
	}
	if !bytes.Contains(body, []byte(nodePlaceholder)) {
		return nil, fmt.Errorf("--template %s never names the node placeholder %q (set --placeholder)", path, nodePlaceholder)
	}
	if uidPlaceholder == "" || !bytes.Contains(body, []byte(uidPlaceholder)) {
		// No uid placeholder: the template's own request.uid becomes one, which
		// needs its value to occur exactly once (an object's uid can be equal).
		if review.Request == nil || review.Request.UID == nil {
			return nil, fmt.Errorf("--template %s has no request.uid and no %q: add either", path, uidPlaceholder)
		}
		quoted, _ := json.Marshal(*review.Request.UID)
		if n := bytes.Count(body, quoted); n != 1 {
			return nil, fmt.Errorf("--template %s: request.uid %s occurs %d times; put --uid-placeholder in request.uid instead", path, quoted, n)
		}
		uidPlaceholder = "\x00uid\x00"
		body = bytes.Replace(body, quoted, []byte(`"`+uidPlaceholder+`"`), 1)
	}
	t := &reviewTemplate{}
	for len(body) > 0 {
		iNode := bytes.Index(body, []byte(nodePlaceholder))
		iUID := bytes.Index(body, []byte(uidPlaceholder))
		next, slot, skip := -1, 0, 0
		if iNode >= 0 && (iUID < 0 || iNode < iUID) {
			next, slot, skip = iNode, slotNode, len(nodePlaceholder)
		} else if iUID >= 0 {
			next, slot, skip = iUID, slotUID, len(uidPlaceholder)
		}
		if next < 0 {
			t.parts = append(t.parts, body)
			break
		}
		t.parts = append(t.parts, body[:next])
		t.slots = append(t.slots, slot)
		body = body[next+skip:]
	}
	if len(t.parts) == len(t.slots) {
		t.parts = append(t.parts, nil)
	}
	for _, p := range t.parts {
		t.size += len(p)
	}
	return t, nil
}

// renderedLen is the length appendTo will add for node and uid.
func (t *reviewTemplate) renderedLen(node, uid string) int {
	n := t.size
	for _, slot := range t.slots {
		if slot == slotNode {
			n += len(node)
		} else {
			n += len(uid)
		}
	}
	return n
}

func (t *reviewTemplate) appendTo(b []byte, node, uid string) []byte {
	for i, p := range t.parts {
		b = append(b, p...)
		if i < len(t.slots) {
			if t.slots[i] == slotNode {
				b = append(b, node...)
			} else {
				b = append(b, uid...)
			}
		}
	}
	return b
}
