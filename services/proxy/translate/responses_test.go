package translate

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// A top-level response_format (chat's field, not the Responses API's) is dropped like any unknown
// field, and text.format is what becomes the chat request's response_format.
func TestResponsesResponseFormatComesFromTextFormat(t *testing.T) {
	out, err := ResponsesToChat([]byte(`{"model":"m","input":"hi","response_format":{"type":"json_object"}}`), Target{})
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out.Body, "response_format").Exists() || !slices.Contains(out.Dropped, "response_format") {
		t.Fatalf("%s dropped %v", out.Body, out.Dropped)
	}
	out, err = ResponsesToChat([]byte(`{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`), Target{})
	if err != nil || gjson.GetBytes(out.Body, "response_format.type").String() != "json_object" {
		t.Fatalf("%v %s", err, out.Body)
	}
}
