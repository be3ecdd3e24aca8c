package convert

// review.go: the ConversionReview wire types: building requests, the response shape, and the
// review version and strategy a CRD asks for.

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ReviewVersionFor returns the ConversionReview version the API server would send for crd:
// the first of conversionReviewVersions that it supports.
func ReviewVersionFor(crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	c := crd.Spec.Conversion
	if c == nil || c.Webhook == nil {
		return "", fmt.Errorf("%s: spec.conversion.webhook is not set", crd.Name)
	}
	for _, v := range c.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: spec.conversion.webhook.conversionReviewVersions %v holds no supported version (v1, v1beta1): the API server cannot call this webhook either", crd.Name, c.Webhook.ConversionReviewVersions)
}

// Strategy returns spec.conversion.strategy (None when unset).
func Strategy(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == "" {
		return string(apiextensionsv1.NoneConverter)
	}
	return string(crd.Spec.Conversion.Strategy)
}

// BuildReview marshals a ConversionReview request of the given version (v1 or v1beta1).
// objects are JSON objects.
func BuildReview(reviewVersion string, uid types.UID, desiredAPIVersion string, objects [][]byte) ([]byte, error) {
	raws := make([]runtime.RawExtension, len(objects))
	for i, o := range objects {
		raws[i] = runtime.RawExtension{Raw: o}
	}
	switch reviewVersion {
	case "v1":
		return json.Marshal(&apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: raws},
		})
	case "v1beta1":
		return json.Marshal(&apiextensionsv1beta1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1beta1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1beta1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: raws},
		})
	}
	return nil, fmt.Errorf("ConversionReview version %q is not supported: use v1 or v1beta1", reviewVersion)
}

// reviewResponse is the part of a ConversionReview response that is checked. It is decoded
// case-sensitively with integers preserved, like the API server's decoder.
type reviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID              types.UID         `json:"uid"`
		ConvertedObjects []json.RawMessage `json:"convertedObjects"`
		Result           metav1.Status     `json:"result"`
	} `json:"response"`
}
