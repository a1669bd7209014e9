//! A PyTorch state dict into a model that is not in the zoo, by layer path: the library call
//! `import_state_dict_into`.

use bnn_layers::{BayesOptions, CodebookView, export_params, test_device};
use bnn_models::torch_names::Convention;
use bnn_models::{Architecture, ClassifierBody, Dense, Kind, LayerFactory, ModelError};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swbnn::interop::{HostTensor, InteropError, StateDict, import_state_dict_into};

#[derive(Module, Debug)]
struct TwoLayer {
    hidden: Dense,
    out: Dense,
}

impl ClassifierBody for TwoLayer {
    fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let h = burn::tensor::activation::relu(self.hidden.forward(x.flatten(1, 3), cb));
        self.out.forward(h, cb)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct TwoLayerConfig {
    kind: Kind,
    bayes: BayesOptions,
}

impl Architecture for TwoLayerConfig {
    type Body = TwoLayer;
    fn kind(&self) -> Kind {
        self.kind
    }
    fn codebook_len(&self) -> usize {
        0
    }
    fn bayes_options(&self) -> &BayesOptions {
        &self.bayes
    }
    fn to_kind(&self, kind: Kind, _codebook_len: usize) -> Self {
        Self {
            kind,
            ..self.clone()
        }
    }
    fn build(&self, f: &mut LayerFactory<'_>) -> Result<TwoLayer, ModelError> {
        Ok(TwoLayer {
            hidden: f.linear("hidden", 4, 3, true),
            out: f.linear("out", 3, 2, true),
        })
    }
}

/// bayesian-torch's `LinearReparameterization` keys for a layer of `[out, in]` weights.
fn layer(dict: &mut StateDict, name: &str, out: usize, inp: usize, base: f32) {
    let seq = |n: usize, at: f32| (0..n).map(|i| at + 0.01 * i as f32).collect::<Vec<_>>();
    dict.insert(
        format!("{name}.mu_weight"),
        HostTensor::f32(vec![out, inp], seq(out * inp, base)),
    );
    dict.insert(
        format!("{name}.rho_weight"),
        HostTensor::f32(vec![out, inp], vec![-4.0; out * inp]),
    );
    dict.insert(
        format!("{name}.mu_bias"),
        HostTensor::f32(vec![out], seq(out, -base)),
    );
    dict.insert(
        format!("{name}.rho_bias"),
        HostTensor::f32(vec![out], vec![-5.0; out]),
    );
}

#[test]
fn a_state_dict_maps_onto_any_architecture_by_layer_path() {
    let config = TwoLayerConfig {
        kind: Kind::Deterministic,
        bayes: BayesOptions::new(),
    };
    let mut dict = StateDict::new();
    layer(&mut dict, "hidden", 3, 4, 0.1);
    layer(&mut dict, "out", 2, 3, 0.5);
    let identity = |_: Convention, module: &str| module.to_string();
    let (model, imported, convention) =
        import_state_dict_into(&dict, &config, None, &test_device(), &identity).unwrap();
    assert_eq!(convention, Convention::BayesianTorch);
    assert_eq!(imported.kind, Kind::Bayesian);
    let params = export_params(&model);
    let get = |p: &str| &params.iter().find(|t| t.path == p).unwrap().data;
    // PyTorch's [out, in] becomes burn's [in, out]: element (o, i) moves to (i, o).
    let torch = dict["hidden.mu_weight"].to_f32();
    let ours = get("body.hidden.weight_mu");
    for o in 0..3 {
        for i in 0..4 {
            assert_eq!(ours[i * 3 + o], torch[o * 4 + i]);
        }
    }
    assert_eq!(get("body.out.bias_mu"), &dict["out.mu_bias"].to_f32());
    assert_eq!(get("body.out.bias_rho"), &vec![-5.0; 2]);

    // A key the model lacks, and a parameter without its key, are both named.
    dict.remove("out.mu_bias");
    dict.insert(
        "extra.mu_weight".into(),
        HostTensor::f32(vec![1], vec![0.0]),
    );
    let err = import_state_dict_into(&dict, &config, None, &test_device(), &identity)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, InteropError::Unmatched { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("out.mu_bias") && text.contains("extra.mu_weight"),
        "{text}"
    );
    assert!(text.contains("TwoLayerConfig"), "{text}");
}
