package translate

import "github.com/tidwall/gjson"

// chatChunk is what the stream translators read of a chat completion chunk, the values as they
// stand in its JSON ("" when absent).
type chatChunk struct {
	id, model, usage, err string
	choices               []chatDelta
}

// chatDelta is one choice of a chunk.
type chatDelta struct {
	index, finish, content, reasoningContent, reasoning, toolCalls string
}

// readChatChunk reads a chunk's data in one pass of the scanner; ok is false when it is not a
// JSON object.
func readChatChunk(data []byte) (k chatChunk, ok bool) {
	c := string(data)
	ok = document(c, func(key string, v int) int {
		if key == "choices" && c[v] == '[' {
			return elements(c, v, 1, func(v int) int {
				if c[v] != '{' {
					return valueEnd(c, v, 2)
				}
				var ch chatDelta
				e := members(c, v, 2, func(key string, v int) int {
					if key == "delta" && c[v] == '{' {
						return members(c, v, 3, func(key string, v int) int {
							e := valueEnd(c, v, 4)
							if e < 0 {
								return -1
							}
							switch key {
							case "content":
								ch.content = c[v:e]
							case "reasoning_content":
								ch.reasoningContent = c[v:e]
							case "reasoning":
								ch.reasoning = c[v:e]
							case "tool_calls":
								ch.toolCalls = c[v:e]
							}
							return e
						})
					}
					e := valueEnd(c, v, 3)
					if e < 0 {
						return -1
					}
					switch key {
					case "index":
						ch.index = c[v:e]
					case "finish_reason":
						ch.finish = c[v:e]
					}
					return e
				})
				k.choices = append(k.choices, ch)
				return e
			})
		}
		e := valueEnd(c, v, 1)
		if e < 0 {
			return -1
		}
		switch key {
		case "id":
			k.id = c[v:e]
		case "model":
			k.model = c[v:e]
		case "usage":
			k.usage = c[v:e]
		case "error":
			k.err = c[v:e]
		}
		return e
	})
	return k, ok
}

// first reports whether the choice is the first (index 0 or none): the one a single answer carries.
func (d chatDelta) first() bool {
	return d.index == "" || d.index == "0" || gjson.Parse(d.index).Int() == 0
}

// chatUsageAt reads a chunk's usage object; nil when there is none.
func chatUsageAt(raw string) *chatUsage {
	if kind(raw) != '{' {
		return nil
	}
	u := gjson.Parse(raw)
	out := &chatUsage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int(),
		TotalTokens: u.Get("total_tokens").Int()}
	if d := u.Get("prompt_tokens_details.cached_tokens"); d.Exists() {
		out.PromptTokensDetails = &promptDetails{CachedTokens: d.Int()}
	}
	return out
}
